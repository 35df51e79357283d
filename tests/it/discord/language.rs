//! Cards in the person's language: each Discord interaction carries its user's `locale`.

use super::{ALICE, BOB, CHANNEL, components, custom_id, id_of, setup};

fn labels(message: &serde_json::Value) -> Vec<String> {
    components(message).into_iter().map(|(label, _)| label).collect()
}

#[tokio::test]
async fn a_user_whose_discord_speaks_chinese_gets_a_chinese_card_and_another_user_english() {
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
