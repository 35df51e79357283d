//! Cards in the person's language: Telegram tells askgate each user's `language_code`.

use askgate::channel::telegram::Updates;
use askgate::engine::Settings;
use tempfile::TempDir;

use super::{ALICE, BOB, Tg, buttons, data, edited, id_of};
use crate::fake_telegram::FakeTelegram;

fn labels(message: &serde_json::Value) -> Vec<String> {
    buttons(message).into_iter().map(|(label, _)| label).collect()
}

#[tokio::test]
async fn each_user_gets_cards_in_the_language_their_telegram_speaks() {
    let dir = TempDir::new().unwrap();
    let (fake, url) = FakeTelegram::start().await;
    let tg = Tg::start(&dir, &url, Updates::Polling, Settings::default()).await;
    fake.speaks(ALICE, "zh-hans");

    // Alice's run: askgate's own words are Chinese; the function's prompt and options are not translated.
    fake.text(ALICE, ALICE, "/run demo", None);
    let card = fake.sent("Which library for date formatting?", 1).await;
    assert_eq!(labels(&card), ["1. dayjs", "2. date-fns", "3. luxon", "其他…", "拒绝回答"]);
    let tap = fake.press(ALICE, ALICE, id_of(&card), &data(&card, "date-fns"));
    assert_eq!(fake.callback_answer(tap).await["text"], "已记录。");
    edited(&fake, ALICE, id_of(&card), "✅ date-fns — @user42（经由 telegram）").await;
    let confirm = fake.sent("Archive all 87 emails?", 1).await;
    assert_eq!(labels(&confirm), ["是", "否"]);

    // Bob's app reports no language: English.
    fake.text(BOB, BOB, "/run demo", None);
    let card = fake.sent("Which library for date formatting?", 2).await;
    assert_eq!(card["chat"]["id"], BOB);
    assert_eq!(labels(&card), ["1. dayjs", "2. date-fns", "3. luxon", "Other…", "Decline"]);
    let tap = fake.press(BOB, BOB, id_of(&card), &data(&card, "dayjs"));
    assert_eq!(fake.callback_answer(tap).await["text"], "Recorded.");
    edited(&fake, BOB, id_of(&card), "✅ dayjs — @user43 via telegram").await;
    let confirm = fake.sent("Archive all 87 emails?", 2).await;
    assert_eq!(labels(&confirm), ["Yes", "No"]);
    tg.stop().await;
}
