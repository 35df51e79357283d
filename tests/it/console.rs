//! The console inside the engine: what it prints when it starts.

use std::sync::Arc;

use askgate::channel::console::Console;
use askgate::question::{Answerers, Ask, Conversation, UserRef};
use tokio::io::AsyncReadExt;

use crate::support::{Harness, builtins};

fn local() -> Conversation {
    Conversation::parse("console:local").unwrap()
}

async fn ask(h: &Harness, prompt: &str) {
    let ask = Ask::question(prompt).answerers(Answerers::Users { users: vec![UserRef::operator()] });
    h.engine.asks().ask_external(local(), ask, UserRef::parse("agent:agent").unwrap()).await.unwrap();
}

/// Regression: an agent that asked between askgate's start and the console's first read got
/// its card printed twice, once by the outbox and once in the console's list of what waits.
#[tokio::test]
async fn at_start_the_console_lists_only_questions_asked_before_it_so_no_card_is_printed_twice() {
    let h = Harness::new(builtins()).await;
    // The console that prints cards as they are asked.
    let (printing, _kept) = tokio::io::duplex(1 << 16);
    h.engine.delivery().attach(Console::new(Box::new(printing), h.clock.clone()));
    ask(&h, "Asked before the restart?").await;
    h.clock.advance(1_000);

    // A console made now lists what was asked before it, and not what is asked after it.
    let (output, mut printed) = tokio::io::duplex(1 << 16);
    let console: Arc<Console> = Console::new(Box::new(output), h.clock.clone());
    h.clock.advance(1_000);
    ask(&h, "Asked just after the start?").await;
    // The loop owns the console; when it returns, the output is closed.
    console.read_loop(h.engine.clone(), Box::new(tokio::io::empty()), h.engine.stopping()).await;
    let mut text = String::new();
    printed.read_to_string(&mut text).await.unwrap();
    assert!(text.contains("1 question still waits for your answer:"), "{text}");
    assert!(text.contains("Asked before the restart?"), "{text}");
    assert!(!text.contains("Asked just after the start?"), "{text}");
}
