//! Questions as Discord messages: content and components whose `custom_id` values are the
//! text commands. The layout is built as plain data first, so that Discord's limits are
//! checked and tested without a network; then it becomes serenity's builders.

pub mod form;

use serenity::all::{
    ButtonStyle, CreateActionRow, CreateButton, CreateInputText, CreateModal, CreateSelectMenu, CreateSelectMenuKind,
    CreateSelectMenuOption, InputTextStyle,
};
use std::fmt::Write;

use crate::question::{Kind, Question};
use crate::say;
use crate::text::{Piece, clip};
use crate::wording;

/// Discord's limits.
pub const MAX_CUSTOM_ID: usize = 100;
/// Action rows per message.
pub const MAX_ROWS: usize = 5;
/// Buttons per row.
pub const MAX_BUTTONS_PER_ROW: usize = 5;
/// Options in a string select.
pub const MAX_SELECT_OPTIONS: usize = 25;
/// Characters in a button label.
pub const MAX_BUTTON_LABEL: usize = 80;
/// Characters in a message.
pub const MAX_CONTENT: usize = 2000;
/// Characters in a select option's label, value or description.
pub const MAX_SELECT_TEXT: usize = 100;

/// One option of a string select.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelectOption {
    /// What is shown.
    pub label: String,
    /// What is sent: the option's number from 1 (`#2`).
    pub value: String,
    /// The line shown under the label, when the option has one.
    pub description: Option<String>,
}

/// One component.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Component {
    /// A button.
    Button {
        /// The text.
        label: String,
        /// The command it sends.
        custom_id: String,
        /// Primary for answers, secondary for other options, danger for decline and reject.
        style: Style,
    },
    /// A string select; its values are option numbers from 1.
    Select {
        /// `/answer <uuid>`; the picked numbers are appended.
        custom_id: String,
        /// The options.
        options: Vec<SelectOption>,
        /// At least this many.
        min: u8,
        /// At most this many.
        max: u8,
        /// Shown before anything is picked.
        placeholder: String,
    },
}

/// A button's look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// The main choices.
    Primary,
    /// Secondary actions.
    Secondary,
    /// Decline, reject.
    Danger,
}

/// A rendered question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The message text (Discord markdown, escaped).
    pub content: String,
    /// The action rows.
    pub rows: Vec<Vec<Component>>,
}

/// Escapes Discord markdown. Not serenity's `MessageBuilder::push_safe`: it escapes only `*`,
/// `` ` `` and `_`, so `~~strikes~~`, `||spoilers||`, `> quotes`, `# headings`, `- lists` and
/// `[masked](links)` in a prompt would still render, and it replaces zero-width joiners with
/// spaces, which breaks emoji sequences.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\\' | '*' | '_' | '~' | '`' | '|' | '>' | '#' | '-' | '[' | ']' | '(' | ')') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The most messages one reply is sent in (a question shown whole by `/show`).
pub const MAX_REPLY_PARTS: usize = 24;

/// Shortens text to `max` characters with a clear marker.
pub fn shorten(text: &str, max: usize) -> String {
    clip(text, max, "… [shortened]")
}

/// What a card says between its detail and its footer.
enum Body<'a> {
    /// Nothing.
    None,
    /// Discord markdown, already escaped: lines that may be shortened, then one kept whole.
    Lines(&'a str, &'a str),
    /// Text shown verbatim in a code block.
    Code(&'a str),
}

fn content(q: &Question, now_ms: i64, body: Body<'_>, tail: &str) -> String {
    let title = match q.kind {
        Kind::Approval => say!(q.presentation.locale, "card.approve_prefix", action = q.prompt.as_str()),
        _ => q.prompt.clone(),
    };
    let footer = wording::footer(q, now_ms);
    let room = MAX_CONTENT.saturating_sub(footer.chars().count() + tail.chars().count() + 40);
    // The body (a form's fields) gets at most three fifths of the room; the prompt and the
    // detail share what it leaves.
    let body = match body {
        Body::None => String::new(),
        Body::Lines(lines, last) => {
            format!("{}\n{last}", shorten(lines, (room * 3 / 5).saturating_sub(last.chars().count() + 1)))
        }
        Body::Code(code) => {
            let code = code.replace("```", "`\u{200b}``");
            format!("\n```\n{}\n```", shorten(&code, (room * 3 / 5).saturating_sub(10)))
        }
    };
    let budget = room.saturating_sub(body.chars().count());
    // Cut where it must be, saying where the whole is.
    let cut = wording::cut_mark(q);
    let title = escape(&clip(&title, budget / 2, &cut));
    let mut out = format!("**{title}**");
    if let Some(detail) = &q.detail {
        let detail = clip(detail, budget.saturating_sub(title.chars().count()), &cut);
        for piece in crate::text::pieces(&detail) {
            match piece {
                Piece::Text(text) => _ = write!(out, "\n{}", escape(text)),
                // A fence inside the code would end the block early: break it with a zero-width space.
                Piece::Code(code) => _ = write!(out, "\n```\n{}\n```", code.replace("```", "`\u{200b}``")),
            }
        }
    }
    out.push_str(&body);
    out.push_str(&format!("\n-# {}", escape(&footer)));
    if !tail.is_empty() {
        out.push('\n');
        out.push_str(tail);
    }
    shorten(&out, MAX_CONTENT)
}

fn button(label: &str, custom_id: String, style: Style) -> Component {
    Component::Button { label: clip(label, MAX_BUTTON_LABEL, "…"), custom_id, style }
}

fn select(q: &Question, min: u8, max: u8) -> Component {
    let options = (q.options.iter().enumerate())
        .map(|(i, o)| SelectOption {
            label: clip(o, MAX_SELECT_TEXT, "…"),
            value: format!("#{}", i + 1),
            description: q.description(i).map(|d| clip(d, MAX_SELECT_TEXT, "…")),
        })
        .collect();
    let l = q.presentation.locale;
    let placeholder = if q.multi { say!(l, "discord.pick_some") } else { say!(l, "discord.pick_one") };
    Component::Select { custom_id: format!("/answer {}", q.id), options, min, max, placeholder }
}

/// Renders a pending question.
pub fn card(q: &Question, now_ms: i64) -> Layout {
    if let Some(form) = &q.form {
        return form_card(q, form, now_ms);
    }
    let layout = Layout { content: content(q, now_ms, Body::None, ""), rows: rows(q) };
    if fits(&layout) {
        return layout;
    }
    // Never a card with controls silently missing: the commands go in the text instead.
    let commands =
        wording::card(q, 0).lines().filter(|l| l.contains('/')).map(str::trim).collect::<Vec<_>>().join("\n");
    Layout { content: content(q, now_ms, Body::None, &format!("```\n{commands}\n```")), rows: Vec::new() }
}

/// A form's card: its fields, with selects and a modal to fill them in; or, when they do not
/// fit Discord's limits, its fields and commands as text, and Decline.
fn form_card(q: &Question, form: &crate::question::form::Form, now_ms: i64) -> Layout {
    if let Some(rows) = form::rows(q, form) {
        let (fields, how) = form::fields_text(form, q.presentation.locale);
        let layout = Layout { content: content(q, now_ms, Body::Lines(&fields, &how), ""), rows };
        if fits(&layout) {
            return layout;
        }
    }
    // The text card's last three lines say how to answer: all at once, field by field, decline.
    let text = wording::form_text(q);
    let lines: Vec<&str> = text.lines().collect();
    let (fields, commands) = lines.split_at(lines.len().saturating_sub(3));
    let commands = commands.iter().map(|l| l.trim()).collect::<Vec<_>>().join("\n");
    let decline = say!(q.presentation.locale, "button.decline");
    let decline = vec![vec![button(&decline, format!("/decline {}", q.id), Style::Danger)]];
    Layout {
        content: content(q, now_ms, Body::Code(&fields.join("\n")), &format!("```\n{commands}\n```")),
        rows: decline,
    }
}

/// The message of a resolved question: its text with the outcome, and no components.
pub fn resolved(q: &Question, now_ms: i64) -> String {
    let base = content(q, now_ms, Body::None, "");
    let base = base.split("\n-# ").next().unwrap_or_default().to_owned();
    shorten(&format!("{base}\n{}", escape(&q.outcome_line())), MAX_CONTENT)
}

fn rows(q: &Question) -> Vec<Vec<Component>> {
    let (id, l) = (q.id, q.presentation.locale);
    let say = |key: &str| rust_i18n::t!(key, locale = l.as_str()).into_owned();
    let decline = button(&say("button.decline"), format!("/decline {id}"), Style::Danger);
    match q.kind {
        Kind::Form => vec![vec![decline]],
        Kind::Confirm => vec![vec![
            button(&say("button.yes"), format!("/answer {id} yes"), Style::Primary),
            button(&say("button.no"), format!("/answer {id} no"), Style::Secondary),
        ]],
        Kind::Approval if q.needs_quorum() => vec![vec![
            button(&say("button.approve"), format!("/approve {id}"), Style::Primary),
            button(&say("button.reject"), format!("/deny {id}"), Style::Danger),
            button(&say("button.reject_with_note"), format!("/note {id}"), Style::Danger),
        ]],
        Kind::Approval => {
            let mut row = vec![
                button(&say("button.allow_once"), format!("/approve {id}"), Style::Primary),
                button(&say("button.allow_always"), format!("/approve {id} always"), Style::Secondary),
                button(&say("button.reject"), format!("/deny {id}"), Style::Danger),
                button(&say("button.reject_with_note"), format!("/note {id}"), Style::Danger),
            ];
            if q.allow_custom {
                // An editable approval: a form with the action, to allow as edited.
                row.push(button(&say("button.edit"), format!("/other {id}"), Style::Secondary));
            }
            vec![row]
        }
        Kind::Question => {
            let mut actions = Vec::new();
            if q.allow_custom {
                let label = if q.options.is_empty() { say("button.answer") } else { say("button.other") };
                actions.push(button(&label, format!("/other {id}"), Style::Secondary));
            }
            actions.push(decline);
            let mut rows = Vec::new();
            let max_buttons = (MAX_ROWS - 1) * MAX_BUTTONS_PER_ROW;
            if q.multi {
                let n = u8::try_from(q.options.len()).unwrap_or(u8::MAX);
                rows.push(vec![select(q, 1, n)]);
            } else if q.options.len() > max_buttons || !q.descriptions.is_empty() {
                // A select shows each option's description under its label; buttons have no room.
                rows.push(vec![select(q, 1, 1)]);
            } else {
                for (chunk_start, chunk) in
                    q.options.chunks(MAX_BUTTONS_PER_ROW).enumerate().map(|(i, c)| (i * MAX_BUTTONS_PER_ROW, c))
                {
                    rows.push(
                        chunk
                            .iter()
                            .enumerate()
                            .map(|(i, o)| button(o, format!("/answer {id} #{}", chunk_start + i + 1), Style::Primary))
                            .collect(),
                    );
                }
            }
            rows.push(actions);
            rows
        }
    }
}

/// Whether a layout keeps every Discord limit.
pub fn fits(layout: &Layout) -> bool {
    layout.content.chars().count() <= MAX_CONTENT
        && layout.rows.len() <= MAX_ROWS
        && layout.rows.iter().all(|row| {
            let selects = row.iter().filter(|c| matches!(c, Component::Select { .. })).count();
            (selects == 0 && row.len() <= MAX_BUTTONS_PER_ROW || selects == 1 && row.len() == 1)
                && row.iter().all(|c| match c {
                    Component::Button { label, custom_id, .. } => {
                        !custom_id.is_empty()
                            && custom_id.len() <= MAX_CUSTOM_ID
                            && label.chars().count() <= MAX_BUTTON_LABEL
                    }
                    Component::Select { custom_id, options, min, max, placeholder } => {
                        custom_id.len() <= MAX_CUSTOM_ID
                            && placeholder.chars().count() <= form::MAX_SELECT_PLACEHOLDER
                            && !options.is_empty()
                            && options.len() <= MAX_SELECT_OPTIONS
                            && options.iter().all(|o| {
                                o.label.chars().count() <= MAX_SELECT_TEXT
                                    && o.description.as_ref().is_none_or(|d| d.chars().count() <= MAX_SELECT_TEXT)
                            })
                            && *min >= 1
                            && usize::from(*max) <= options.len()
                            && min <= max
                    }
                })
        })
}

/// The layout as serenity's builders.
pub fn components(layout: &Layout) -> Vec<CreateActionRow> {
    layout
        .rows
        .iter()
        .map(|row| match row.as_slice() {
            [Component::Select { custom_id, options, min, max, placeholder }] => {
                let options = (options.iter())
                    .map(|o| {
                        let option = CreateSelectMenuOption::new(&o.label, &o.value);
                        match &o.description {
                            Some(about) => option.description(about),
                            None => option,
                        }
                    })
                    .collect();
                CreateActionRow::SelectMenu(
                    CreateSelectMenu::new(custom_id, CreateSelectMenuKind::String { options })
                        .min_values(*min)
                        .max_values(*max)
                        .placeholder(placeholder),
                )
            }
            buttons => CreateActionRow::Buttons(
                buttons
                    .iter()
                    .filter_map(|c| match c {
                        Component::Button { label, custom_id, style } => {
                            Some(CreateButton::new(custom_id).label(label).style(match style {
                                Style::Primary => ButtonStyle::Primary,
                                Style::Secondary => ButtonStyle::Secondary,
                                Style::Danger => ButtonStyle::Danger,
                            }))
                        }
                        Component::Select { .. } => None,
                    })
                    .collect(),
            ),
        })
        .collect()
}

/// The modal "Other…" opens: its submit is `/answer <uuid> <text>`.
pub fn other_modal(q: &Question) -> CreateModal {
    let (id, l) = (q.id, q.presentation.locale);
    let title = say!(l, "discord.answer_title", prompt = q.prompt.as_str());
    CreateModal::new(format!("/answer {id}"), clip(&title, 45, "…")).components(vec![CreateActionRow::InputText(
        CreateInputText::new(InputTextStyle::Paragraph, say!(l, "discord.your_answer"), "text").required(true),
    )])
}

/// The modal an editable approval's "Edit…" opens, holding the action: its submit is
/// `/edit <uuid> <new action>`.
pub fn edit_modal(q: &Question) -> CreateModal {
    let (id, l) = (q.id, q.presentation.locale);
    CreateModal::new(format!("/edit {id}"), say!(l, "button.edit_then_allow")).components(vec![
        CreateActionRow::InputText(
            CreateInputText::new(InputTextStyle::Paragraph, say!(l, "discord.action_to_allow"), "text")
                .value(clip(&q.prompt, 4000, ""))
                .required(true),
        ),
    ])
}

/// The modal "Reject with note…" opens: its submit is `/deny <uuid> <text>`.
pub fn note_modal(q: &Question) -> CreateModal {
    let (id, l) = (q.id, q.presentation.locale);
    CreateModal::new(format!("/deny {id}"), say!(l, "discord.note_title")).components(vec![CreateActionRow::InputText(
        CreateInputText::new(InputTextStyle::Paragraph, say!(l, "discord.why_reject"), "text").required(true),
    )])
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::question::{Ask, MAX_OPTIONS};

    fn question(ask: Ask) -> Question {
        crate::question::test_question(ask)
    }

    #[test]
    fn fenced_code_in_a_detail_is_a_code_block_that_cannot_be_closed_early() {
        let q = question(Ask::approval("files__write").detail("alice wants:\n```json\n{\"a\": \"``` *x*\"}\n```"));
        let text = content(&q, 0, Body::None, "");
        assert!(text.contains("\nalice wants:\n```\n{\"a\": \"`\u{200b}`` *x*\"}\n```"), "{text}");
    }

    #[test]
    fn a_card_cut_to_fit_says_that_show_shows_it_all() {
        let q = question(Ask::approval("deploy").detail("line\n".repeat(1_000)));
        let text = content(&q, 0, Body::None, "");
        assert!(text.contains(&format!("… \\[cut to fit: /show {} shows it all\\]", q.id.short())), "{text}");
        assert!(text.chars().count() <= MAX_CONTENT);
    }

    #[test]
    fn every_layout_keeps_discords_limits_and_custom_ids_fit() {
        let long = "ä".repeat(100);
        for n in [0, 1, 5, 6, 19, 20, 21, MAX_OPTIONS] {
            let options: Vec<String> = (0..n).map(|i| format!("{i} {}", &long[..150])).collect();
            for (multi, custom) in [(false, false), (false, true), (true, false), (true, true)] {
                if multi && n == 0 {
                    continue;
                }
                let q = question(
                    Ask::question(long.repeat(30))
                        .detail(long.repeat(30))
                        .options(options.clone())
                        .multi(multi)
                        .allow_custom(custom),
                );
                let layout = card(&q, 0);
                assert!(fits(&layout), "{n} options, multi {multi}: {layout:?}");
                assert!(!layout.rows.is_empty(), "{n} options, multi {multi} lost its controls");
                // The serialised components, as serenity sends them.
                let json: Value = serde_json::to_value(components(&layout)).unwrap();
                for row in json.as_array().unwrap() {
                    for c in row["components"].as_array().unwrap() {
                        let id = c["custom_id"].as_str().unwrap();
                        assert!(id.len() <= MAX_CUSTOM_ID && id.starts_with('/'), "{id}");
                    }
                }
            }
        }
        for ask in [Ask::confirm("Sure?"), Ask::approval("rm -rf /")] {
            assert!(fits(&card(&question(ask), 0)));
        }
    }

    #[test]
    fn up_to_twenty_options_are_buttons_and_more_use_a_select() {
        let twenty: Vec<String> = (1..=20).map(|i| format!("o{i}")).collect();
        let layout = card(&question(Ask::question("Pick").options(twenty)), 0);
        assert_eq!(layout.rows.len(), 5);
        assert!(matches!(&layout.rows[0][0], Component::Button { custom_id, .. } if custom_id.ends_with(" #1")));
        let many: Vec<String> = (1..=21).map(|i| format!("o{i}")).collect();
        let layout = card(&question(Ask::question("Pick").options(many)), 0);
        assert!(matches!(&layout.rows[0][0], Component::Select { max: 1, .. }));
    }

    #[test]
    fn multi_select_is_a_select_with_min_and_max() {
        let q = question(Ask::question("Days?").options(["Mon", "Tue", "Wed"]).multi(true));
        let layout = card(&q, 0);
        let Component::Select { custom_id, min, max, options, .. } = &layout.rows[0][0] else { panic!("{layout:?}") };
        assert_eq!(custom_id, &format!("/answer {}", q.id));
        assert_eq!((*min, *max), (1, 3));
        assert_eq!(options[2], SelectOption { label: "Wed".into(), value: "#3".into(), description: None });
    }

    #[test]
    fn options_with_descriptions_are_a_select_showing_each_within_discords_limit() {
        let q =
            question(Ask::question("Which?").option("dayjs", "2 kB").option("luxon", "é".repeat(200)).option("x", ""));
        let layout = card(&q, 0);
        assert!(fits(&layout), "{layout:?}");
        let Component::Select { options, max: 1, .. } = &layout.rows[0][0] else { panic!("{layout:?}") };
        assert_eq!(options[0].description.as_deref(), Some("2 kB"));
        assert_eq!(options[1].description.as_ref().map(|d| d.chars().count()), Some(MAX_SELECT_TEXT));
        assert_eq!(options[2].description, None, "a blank description is none");
        let json = serde_json::to_value(components(&layout)).unwrap();
        assert_eq!(json[0]["components"][0]["options"][0]["description"], "2 kB", "{json}");
    }

    #[test]
    fn markdown_in_prompts_is_escaped() {
        let q = question(Ask::question("Use *bold* _now_?"));
        assert!(card(&q, 0).content.starts_with("**Use \\*bold\\* \\_now\\_?**"));
    }
}
