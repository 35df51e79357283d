//! Questions as Slack messages in Block Kit: sections for the prompt and its detail, a context
//! line for the id and expiry, and buttons whose `value` is the text command. The layout is
//! plain data first, so that Slack's limits are checked and tested without a network; then it
//! becomes slack-morphism's blocks.

use slack_morphism::prelude::*;

use crate::question::{Kind, Question, QuestionId};
use crate::say;
use crate::text::{Piece, clip};
use crate::wording;

/// Characters in a section's text.
pub const MAX_SECTION: usize = 3000;
/// Blocks in a message.
pub const MAX_BLOCKS: usize = 50;
/// Elements in an actions block.
pub const MAX_ELEMENTS: usize = 25;
/// Characters in a button's value.
pub const MAX_VALUE: usize = 2000;
/// Characters in a button's or an option's text.
pub const MAX_LABEL: usize = 75;
/// Options in a static select.
pub const MAX_OPTIONS: usize = 100;
/// The detail's sections at most; what is longer is shortened with a note.
const MAX_DETAIL_SECTIONS: usize = 8;
/// Buttons per actions block, so that a card reads as rows.
const BUTTONS_PER_ROW: usize = 5;

/// One block of a card.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Block {
    /// A section of mrkdwn text (escaped).
    Section(String),
    /// A small grey line of mrkdwn text.
    Context(String),
    /// A row of controls.
    Actions(Vec<Element>),
    /// A multi-select menu beside its label; the picks are sent by the card's Submit button.
    Pick {
        /// The label beside the menu.
        label: String,
        /// (text, value) pairs; values are option numbers `#1`…
        options: Vec<(String, String)>,
    },
}

/// A control.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Element {
    /// A button.
    Button {
        /// The text.
        label: String,
        /// Unique on the card.
        action_id: String,
        /// The command it sends.
        value: String,
        /// Primary for the main choice, danger for decline and reject.
        style: Option<Style>,
    },
    /// A single-choice menu; its `action_id` is `/answer <id>`, the picked value (`#2`) is
    /// appended.
    Select {
        /// `/answer <uuid>`.
        action_id: String,
        /// (text, value) pairs.
        options: Vec<(String, String)>,
    },
}

/// A button's look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// The main choice.
    Primary,
    /// Decline, reject.
    Danger,
}

/// A rendered message: the notification text and the blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Card {
    /// The plain text notifications and old clients show.
    pub text: String,
    /// The blocks.
    pub blocks: Vec<Block>,
}

/// Escapes the three characters mrkdwn reads as markup; a `<!channel>` in a prompt stays text.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Shortens text to `max` characters with a clear marker.
pub fn shorten(text: &str, max: usize) -> String {
    clip(text, max, "… [shortened]")
}

fn title(q: &Question) -> String {
    match q.kind {
        Kind::Approval => format!("Approve: {}", q.prompt),
        _ => q.prompt.clone(),
    }
}

/// The prompt, bold, and the detail: text as text, code as code blocks, each section within
/// Slack's limit, and the whole within [`MAX_DETAIL_SECTIONS`] with a note where it was cut.
fn text_blocks(q: &Question) -> Vec<Block> {
    let cut = crate::wording::cut_mark(q);
    let mut blocks = vec![Block::Section(format!("*{}*", escape(&clip(&title(q), 2000, &cut))))];
    let Some(detail) = &q.detail else { return blocks };
    let mut sections = Vec::new();
    for piece in crate::text::pieces(detail) {
        let (text, code) = match piece {
            Piece::Text(text) if text.trim().is_empty() => continue,
            Piece::Text(text) => (escape(text), false),
            // A fence inside the code would end the block early.
            Piece::Code(code) => (escape(&code.replace("```", "`\u{200b}``")), true),
        };
        let budget = if code { MAX_SECTION - 8 } else { MAX_SECTION };
        let chars: Vec<char> = text.chars().collect();
        for chunk in chars.chunks(budget) {
            let chunk: String = chunk.iter().collect();
            sections.push(if code { format!("```{chunk}```") } else { chunk });
        }
    }
    if sections.len() > MAX_DETAIL_SECTIONS {
        sections.truncate(MAX_DETAIL_SECTIONS);
        sections.push(format!("_{}_", escape(&cut)));
    }
    blocks.extend(sections.into_iter().map(Block::Section));
    blocks
}

fn button(label: &str, n: usize, value: String, style: Option<Style>) -> Element {
    Element::Button { label: clip(label, MAX_LABEL, "…"), action_id: format!("a{n}"), value, style }
}

fn options(q: &Question) -> Vec<(String, String)> {
    q.options.iter().enumerate().map(|(i, o)| (clip(o, MAX_LABEL, "…"), format!("#{}", i + 1))).collect()
}

/// The options with their descriptions, a line each (`*1. dayjs* — 2 kB, no plugins`), when any
/// has one: Slack's menus show labels only. Each description within Slack's own limit for one
/// (75 characters), the lines packed into sections within theirs.
fn described(q: &Question) -> Vec<Block> {
    if q.descriptions.is_empty() {
        return Vec::new();
    }
    let mut sections: Vec<String> = Vec::new();
    for (i, label) in q.options.iter().enumerate() {
        let mut line = format!("*{}. {}*", i + 1, escape(&clip(label, MAX_LABEL, "…")));
        if let Some(about) = q.description(i) {
            line.push_str(" — ");
            line.push_str(&escape(&clip(about, MAX_LABEL, "…")));
        }
        match sections.last_mut() {
            Some(last) if last.chars().count() + 1 + line.chars().count() <= MAX_SECTION => {
                last.push('\n');
                last.push_str(&line);
            }
            _ => sections.push(line),
        }
    }
    sections.into_iter().map(Block::Section).collect()
}

/// The controls of a pending question.
fn controls(q: &Question) -> Vec<Block> {
    let (id, l) = (q.id, q.presentation.locale);
    let mut n = 0;
    let mut next = || {
        n += 1;
        n
    };
    if q.form.is_some() || q.kind == Kind::Form {
        return vec![
            Block::Section(escape(&crate::wording::form_text(q))),
            Block::Actions(vec![
                // The typed `/fill` shows the fields as text; on Slack the button opens a modal.
                button(&say!(l, "button.fill_in"), next(), format!("/fill {id}"), Some(Style::Primary)),
                button(&say!(l, "button.decline"), next(), format!("/decline {id}"), Some(Style::Danger)),
            ]),
        ];
    }
    match q.kind {
        Kind::Form => Vec::new(),
        Kind::Confirm => vec![Block::Actions(vec![
            button(&say!(l, "button.yes"), next(), format!("/answer {id} yes"), Some(Style::Primary)),
            button(&say!(l, "button.no"), next(), format!("/answer {id} no"), None),
        ])],
        Kind::Approval => {
            let mut row = Vec::new();
            if q.needs_quorum() {
                row.push(button("Approve", next(), format!("/approve {id}"), Some(Style::Primary)));
            } else {
                row.push(button("Allow once", next(), format!("/approve {id}"), Some(Style::Primary)));
                row.push(button("Allow always", next(), format!("/approve {id} always"), None));
            }
            row.push(button("Reject", next(), format!("/deny {id}"), Some(Style::Danger)));
            row.push(button("Reject with note…", next(), format!("/note {id}"), Some(Style::Danger)));
            if q.allow_custom && !q.needs_quorum() {
                row.push(button("Edit…", next(), format!("/other {id}"), None));
            }
            vec![Block::Actions(row)]
        }
        Kind::Question => {
            let mut blocks = Vec::new();
            let mut last = Vec::new();
            if q.multi {
                blocks.push(Block::Pick { label: "Pick one or more, then Submit".to_owned(), options: options(q) });
                last.push(button("Submit", next(), format!("/submit {id}"), Some(Style::Primary)));
            } else if q.options.len() > 4 * BUTTONS_PER_ROW {
                blocks.push(Block::Actions(vec![Element::Select {
                    action_id: format!("/answer {id}"),
                    options: options(q),
                }]));
            } else {
                for chunk in q.options.iter().enumerate().collect::<Vec<_>>().chunks(BUTTONS_PER_ROW) {
                    let row = chunk
                        .iter()
                        .map(|(i, o)| button(o, next(), format!("/answer {id} #{}", i + 1), Some(Style::Primary)))
                        .collect();
                    blocks.push(Block::Actions(row));
                }
            }
            if q.allow_custom {
                let label = if q.options.is_empty() { say!(l, "button.answer") } else { say!(l, "button.other") };
                last.push(button(&label, next(), format!("/other {id}"), None));
            }
            last.push(button(&say!(l, "button.decline"), next(), format!("/decline {id}"), Some(Style::Danger)));
            blocks.push(Block::Actions(last));
            blocks
        }
    }
}

/// Renders a pending question.
pub fn card(q: &Question, now_ms: i64) -> Card {
    let mut blocks = text_blocks(q);
    blocks.extend(described(q));
    blocks.push(Block::Context(escape(&wording::footer(q, now_ms))));
    let mut with_controls = blocks.clone();
    with_controls.extend(controls(q));
    let text = shorten(&title(q), 300);
    let card = Card { text: text.clone(), blocks: with_controls };
    if fits(&card) {
        return card;
    }
    // Never a card with controls silently missing: the commands go in the text instead.
    let commands =
        wording::card(q, 0).lines().filter(|l| l.contains('/')).map(str::trim).collect::<Vec<_>>().join("\n");
    blocks.push(Block::Section(format!("```{}```", escape(&shorten(&commands, MAX_SECTION - 8)))));
    Card { text, blocks }
}

/// The message of a resolved question: its text with the outcome, and no controls.
pub fn resolved(q: &Question) -> Card {
    let mut blocks = text_blocks(q);
    blocks.push(Block::Context(escape(&q.outcome_line())));
    Card { text: shorten(&format!("{} — {}", title(q), q.outcome_line()), 300), blocks }
}

/// A plain message; a long one (`/show`) in as many sections as a message holds.
pub fn plain(text: &str) -> Card {
    let sections = crate::text::split(&escape(text), MAX_SECTION, MAX_BLOCKS, "… [shortened]");
    Card { text: shorten(text, MAX_SECTION), blocks: sections.into_iter().map(Block::Section).collect() }
}

/// Whether a card keeps every Slack limit.
pub fn fits(card: &Card) -> bool {
    let mut action_ids = std::collections::HashSet::new();
    card.blocks.len() <= MAX_BLOCKS
        && card.blocks.iter().all(|b| match b {
            Block::Section(text) | Block::Context(text) => !text.is_empty() && text.chars().count() <= MAX_SECTION,
            Block::Pick { options, .. } => !options.is_empty() && options.len() <= MAX_OPTIONS,
            Block::Actions(elements) => {
                !elements.is_empty()
                    && elements.len() <= MAX_ELEMENTS
                    && elements.iter().all(|e| match e {
                        Element::Button { label, action_id, value, .. } => {
                            action_ids.insert(action_id.clone())
                                && label.chars().count() <= MAX_LABEL
                                && !value.is_empty()
                                && value.len() <= MAX_VALUE
                        }
                        Element::Select { action_id, options } => {
                            action_ids.insert(action_id.clone())
                                && action_id.len() <= 255
                                && !options.is_empty()
                                && options.len() <= MAX_OPTIONS
                        }
                    })
            }
        })
}

fn choice(label: &str, value: &str) -> SlackBlockChoiceItem<SlackBlockPlainTextOnly> {
    SlackBlockChoiceItem::new(SlackBlockPlainTextOnly::from(label), value.to_owned())
}

fn markdown(text: &str) -> SlackBlockText {
    SlackBlockText::MarkDown(SlackBlockMarkDownText::new(text.to_owned()))
}

/// The card as slack-morphism's message content.
pub fn content(card: &Card) -> SlackMessageContent {
    let blocks = card
        .blocks
        .iter()
        .map(|block| match block {
            Block::Section(text) => SlackBlock::Section(SlackSectionBlock::new().with_text(markdown(text))),
            Block::Context(text) => {
                SlackBlock::Context(SlackContextBlock::new(vec![SlackContextBlockElement::MarkDown(
                    SlackBlockMarkDownText::new(text.clone()),
                )]))
            }
            Block::Pick { label, options } => {
                let menu = SlackBlockMultiStaticSelectElement::new()
                    .with_action_id("pick".into())
                    .with_placeholder("Pick".into())
                    .with_options(options.iter().map(|(l, v)| choice(l, v)).collect());
                SlackBlock::Section(
                    SlackSectionBlock::new()
                        .with_block_id("pick".into())
                        .with_text(markdown(label))
                        .with_accessory(SlackSectionBlockElement::MultiStaticSelect(menu)),
                )
            }
            Block::Actions(elements) => SlackBlock::Actions(SlackActionsBlock::new(
                elements
                    .iter()
                    .map(|e| match e {
                        Element::Button { label, action_id, value, style } => {
                            let mut b = SlackBlockButtonElement::new(label.as_str().into())
                                .with_action_id(action_id.clone().into())
                                .with_value(value.clone());
                            b.style = style.map(|s| match s {
                                Style::Primary => SlackBlockButtonStyle::Primary,
                                Style::Danger => SlackBlockButtonStyle::Danger,
                            });
                            SlackActionBlockElement::Button(b)
                        }
                        Element::Select { action_id, options } => SlackActionBlockElement::StaticSelect(
                            SlackBlockStaticSelectElement::new()
                                .with_action_id(action_id.clone().into())
                                .with_placeholder("Pick one".into())
                                .with_options(options.iter().map(|(l, v)| choice(l, v)).collect()),
                        ),
                    })
                    .collect(),
            )),
        })
        .collect();
    SlackMessageContent::new().with_text(card.text.clone()).with_blocks(blocks)
}

/// What a form opened from a card is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// An answer in the person's own words.
    Other,
    /// A rejection's note.
    Note,
    /// An approval's action, edited.
    Edit,
}

/// Characters a plain-text input holds (its `initial_value`, its `max_length`).
pub const MAX_INPUT: usize = 3000;

/// A modal whose submission is the command in `private_metadata` with the typed text.
pub fn modal(form: Form, id: QuestionId, prompt: &str) -> SlackView {
    let (title, label, metadata, initial) = match form {
        Form::Other => ("Your answer", clip(prompt, 2000, "…"), format!("/answer {id}"), None),
        Form::Note => ("Reject with a note", "Why (optional)".to_owned(), format!("/deny {id}"), None),
        Form::Edit => ("Edit, then allow", "The action to allow".to_owned(), format!("/edit {id}"), Some(prompt)),
    };
    let mut blocks = Vec::new();
    let mut input = SlackBlockPlainTextInputElement::new()
        .with_action_id("text".into())
        .with_multiline(true)
        .with_max_length(MAX_INPUT as u64);
    match initial {
        // Cut, it would be allowed cut: the box starts empty and says why.
        Some(action) if action.chars().count() > MAX_INPUT => {
            let why = format!(
                "This action is {} characters; Slack's box holds {MAX_INPUT}, so it starts empty rather than cut. \
                 Type the action to allow here, or allow it as it is with the card's buttons.",
                action.chars().count()
            );
            blocks.push(SlackBlock::Section(SlackSectionBlock::new().with_text(md!(why))));
        }
        Some(action) => input = input.with_initial_value(action.to_owned()),
        None => {}
    }
    let mut block = SlackInputBlock::new(label.as_str().into(), SlackInputBlockElement::PlainTextInput(input))
        .with_block_id("text".into());
    if form == Form::Note {
        block = block.with_optional(true);
    }
    blocks.push(SlackBlock::Input(block));
    SlackView::Modal(
        SlackModalView::new(title.into(), blocks)
            .with_submit("Send".into())
            .with_close("Cancel".into())
            .with_callback_id("askgate".into())
            .with_private_metadata(metadata),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::question::Ask;

    #[test]
    fn an_action_longer_than_slacks_box_is_not_cut_in_the_edit_box_and_the_modal_says_so() {
        let id = QuestionId::new();
        let inputs = |view: &SlackView| {
            let SlackView::Modal(modal) = view else { panic!("a modal") };
            let json = serde_json::to_value(modal).unwrap();
            (json["blocks"].as_array().unwrap().clone(), json.to_string())
        };
        let short = "git push origin main";
        let (blocks, _) = inputs(&modal(Form::Edit, id, short));
        assert_eq!(blocks.len(), 1);
        assert_eq!(blocks[0]["element"]["initial_value"], short);
        let long = "x".repeat(MAX_INPUT + 1);
        let (blocks, text) = inputs(&modal(Form::Edit, id, &long));
        assert!(blocks[1]["element"].get("initial_value").is_none(), "the box starts empty: {text}");
        assert_eq!(blocks[1]["element"]["max_length"], MAX_INPUT);
        assert!(text.contains("This action is 3001 characters; Slack's box holds 3000"), "{text}");
    }

    fn question(ask: Ask) -> Question {
        crate::question::test_question(ask)
    }

    #[test]
    fn every_card_keeps_slacks_limits_and_its_buttons_are_commands() {
        let many: Vec<String> =
            (0..crate::question::MAX_OPTIONS).map(|i| format!("option {i} {}", "x".repeat(90))).collect();
        let long = format!("{}\n```\n{}\n```", "word ".repeat(1000), "rm -rf /; ".repeat(1000));
        let described = many.iter().fold(Ask::question("Pick, read"), |ask, o| ask.option(o, "&<".repeat(100)));
        let asks = [
            described,
            Ask::question("Pick").options(["a", "b", "c"]),
            Ask::question("Pick many").options(many.clone()),
            Ask::question("Pick a few").options(many[..20].to_vec()),
            Ask::question("Several").options(["a", "b"]).multi(true),
            Ask::confirm("Sure?"),
            Ask::approval("deploy").detail(long),
            Ask::form(
                "Sign up",
                crate::question::form::Form::from_schema(&serde_json::json!({"type": "object",
                "properties": {"name": {"type": "string"}}}))
                .unwrap(),
            ),
        ];
        for ask in asks {
            let q = question(ask);
            let card = card(&q, 0);
            assert!(fits(&card), "{card:?}");
            let values: Vec<&String> = card
                .blocks
                .iter()
                .flat_map(|b| match b {
                    Block::Actions(e) => e.iter().collect(),
                    _ => Vec::new(),
                })
                .filter_map(|e| match e {
                    Element::Button { value, .. } => Some(value),
                    Element::Select { .. } => None,
                })
                .collect();
            assert!(!values.is_empty(), "{card:?}");
            assert!(values.iter().all(|v| v.starts_with('/') && v.contains(&q.id.to_string())), "{values:?}");
        }
    }

    #[test]
    fn options_with_descriptions_are_listed_with_them_within_slacks_limit() {
        let q =
            question(Ask::question("Which?").option("dayjs", "2 kB").option("luxon", "é".repeat(200)).option("x", ""));
        let card = card(&q, 0);
        let Block::Section(list) = &card.blocks[1] else { panic!("{card:?}") };
        let lines: Vec<&str> = list.lines().collect();
        assert_eq!(lines[0], "*1. dayjs* — 2 kB");
        assert_eq!(lines[1], format!("*2. luxon* — {}…", "é".repeat(MAX_LABEL - 1)));
        assert_eq!(lines[2], "*3. x*");
        let plain = card_of(Ask::question("Which?").options(["a", "b"]));
        assert!(!matches!(&plain.blocks[1], Block::Section(_)), "no list without descriptions: {plain:?}");
    }

    fn card_of(ask: Ask) -> Card {
        card(&question(ask), 0)
    }

    #[test]
    fn a_long_action_is_shortened_with_a_note_and_markup_stays_text() {
        // Escaped, the longest detail a question may have is five times as long.
        let q = question(Ask::approval("<!channel> deploy").detail(format!("```\n{}\n```", "&".repeat(16_000))));
        let card = card(&q, 0);
        let text: Vec<&String> = card
            .blocks
            .iter()
            .filter_map(|b| match b {
                Block::Section(t) => Some(t),
                _ => None,
            })
            .collect();
        assert!(text[0].contains("&lt;!channel&gt;"), "{text:?}");
        assert!(text.last().unwrap().contains(&format!("/show {} shows it all", q.id.short())), "{text:?}");
        assert!(text.iter().all(|t| t.chars().count() <= MAX_SECTION));
    }
}
