//! Cards in the person's language: each Discord interaction carries its user's `locale`; a
//! message carries none, and its guild's `preferred_locale` stands in until one is heard.

use super::{ALICE, BOB, CHANNEL, components, custom_id, id_of, setup};

fn labels(message: &serde_json::Value) -> Vec<String> {
    components(message).into_iter().map(|(label, _)| label).collect()
}

#[tokio::test]
async fn each_user_gets_cards_in_the_language_their_discord_speaks() {
    let (_dir, fake, _, dc) = setup().await;
    fake.speaks(ALICE, "zh-CN");
    let started = fake.run_command(ALICE, CHANNEL, "demo");
    fake.callback(started).await;
    let card = fake.sent("Which library for date formatting?", 1).await;
    assert_eq!(labels(&card), ["dayjs", "date-fns", "luxon", "其他…", "拒绝回答"]);
    let click = fake.click(ALICE, CHANNEL, id_of(&card), &custom_id(&card, "date-fns"));
    let content = fake.callback(click).await["data"]["content"].as_str().unwrap().to_owned();
    assert!(content.contains(&format!("✅ date\\-fns — @user{ALICE}（经由 discord）")), "{content}");
    let confirm = fake.sent("Archive all 87 emails?", 1).await;
    assert_eq!(labels(&confirm), ["是", "否"]);

    let started = fake.run_command(BOB, CHANNEL, "demo");
    fake.callback(started).await;
    let card = fake.sent("Which library for date formatting?", 2).await;
    assert_eq!(labels(&card), ["dayjs", "date-fns", "luxon", "Other…", "Decline"]);
    dc.stop().await;
}

#[tokio::test]
async fn a_message_in_a_chinese_guild_gets_a_chinese_first_card_until_the_person_is_heard_themselves() {
    let (_dir, fake, _, dc) = setup().await;
    const GUILD: u64 = 500_000_000_000_000_777;
    fake.guild(GUILD, "zh-CN");
    fake.guild_message(ALICE, GUILD, CHANNEL, "/run demo");
    let card = fake.sent("Which library for date formatting?", 1).await;
    assert_eq!(labels(&card), ["dayjs", "date-fns", "luxon", "其他…", "拒绝回答"]);
    // Her own Discord speaks English: once an interaction says so, that wins over the guild's.
    fake.speaks(ALICE, "en-US");
    let click = fake.click(ALICE, CHANNEL, id_of(&card), &custom_id(&card, "dayjs"));
    fake.callback(click).await;
    fake.guild_message(ALICE, GUILD, CHANNEL, "/run demo");
    let card = fake.sent("Which library for date formatting?", 2).await;
    assert_eq!(labels(&card), ["dayjs", "date-fns", "luxon", "Other…", "Decline"]);
    dc.stop().await;
}
