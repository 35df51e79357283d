//! Conversation references, kept in the store's platform notes so that a question can reach
//! Teams after a restart, from any instance: a conversation askgate has heard from → its
//! connector (`serviceUrl`) and tenant (`teams:conversation:<id>`); a person who has written
//! to the bot → their Teams id, connector, tenant and, once known, their personal chat with the
//! bot (`teams:user:<AAD object id>`). Teams lets a bot write first only to those.

use std::collections::HashMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::activity::Activity;
use crate::engine::Records;
use crate::store::StoreError;

/// A conversation askgate has heard from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Place {
    /// Its Bot Connector.
    pub service_url: String,
    /// Its tenant.
    #[serde(default)]
    pub tenant: Option<String>,
}

/// A person who has written to the bot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Person {
    /// Their Teams id (`29:…`).
    pub id: String,
    /// The Bot Connector they were last heard through.
    pub service_url: String,
    /// Their tenant.
    #[serde(default)]
    pub tenant: Option<String>,
    /// Their personal chat with the bot, once known.
    #[serde(default)]
    pub personal: Option<String>,
}

/// The references, read through to the store and kept here once read or written.
pub struct References {
    records: Records,
    known: Mutex<HashMap<String, String>>,
}

fn conversation_key(id: &str) -> String {
    format!("teams:conversation:{id}")
}

fn person_key(aad: &str) -> String {
    format!("teams:user:{aad}")
}

impl References {
    /// The references kept in `records`' notes.
    pub fn new(records: Records) -> Self {
        Self { records, known: Mutex::default() }
    }

    /// Keeps where `activity` came from, and who sent it.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn heard(&self, activity: &Activity) -> Result<(), StoreError> {
        let place = Place { service_url: activity.service_url.clone(), tenant: activity.tenant.clone() };
        self.keep(&conversation_key(&activity.conversation), &place).await?;
        let Some(aad) = &activity.from.aad else { return Ok(()) };
        let key = person_key(aad);
        let before: Option<Person> = self.read(&key).await?;
        let personal =
            if activity.personal { Some(activity.conversation.clone()) } else { before.and_then(|p| p.personal) };
        let person = Person {
            id: activity.from.id.clone(),
            service_url: activity.service_url.clone(),
            tenant: activity.tenant.clone(),
            personal,
        };
        self.keep(&key, &person).await
    }

    /// Where the conversation `id` is, when askgate has heard from it.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn place(&self, id: &str) -> Result<Option<Place>, StoreError> {
        self.read(&conversation_key(id)).await
    }

    /// The person with the AAD object id `aad`, when they have written to the bot.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn person(&self, aad: &str) -> Result<Option<Person>, StoreError> {
        self.read(&person_key(aad)).await
    }

    /// Keeps that `person`'s personal chat is `chat`, at `place`.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn chat_started(&self, aad: &str, person: &Person, chat: &str) -> Result<(), StoreError> {
        let place = Place { service_url: person.service_url.clone(), tenant: person.tenant.clone() };
        self.keep(&conversation_key(chat), &place).await?;
        let person = Person { personal: Some(chat.to_owned()), ..person.clone() };
        self.keep(&person_key(aad), &person).await
    }

    async fn read<T: serde::de::DeserializeOwned>(&self, key: &str) -> Result<Option<T>, StoreError> {
        let cached = self.lock().get(key).cloned();
        let value = match cached {
            Some(value) => value,
            None => match note(&self.records, key).await? {
                Some(value) => {
                    self.lock().insert(key.to_owned(), value.clone());
                    value
                }
                None => return Ok(None),
            },
        };
        Ok(serde_json::from_str(&value).ok())
    }

    /// Writes `value` under `key` unless it is there already.
    async fn keep<T: Serialize>(&self, key: &str, value: &T) -> Result<(), StoreError> {
        let text = serde_json::to_string(value).unwrap_or_default();
        if self.lock().get(key) == Some(&text) {
            return Ok(());
        }
        if note(&self.records, key).await?.as_deref() != Some(text.as_str()) {
            remember(&self.records, key, &text).await?;
        }
        self.lock().insert(key.to_owned(), text);
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.known.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The platform note `key` (the store's seam).
async fn note(records: &Records, key: &str) -> Result<Option<String>, StoreError> {
    Ok(records.note(key).await?.map(|n| n.value))
}

/// Keeps the platform note `key` (the store's seam).
async fn remember(records: &Records, key: &str, value: &str) -> Result<(), StoreError> {
    records.remember(key, value).await
}
