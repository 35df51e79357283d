//! JSON-RPC messages one per line (MCP's stdio framing), each at most a given size. A line
//! over the limit is never kept whole: its bytes are read past, and only what is needed to
//! answer it is kept — its top-level `id`, and whether it has a `method` (a request or
//! notification, rather than a response). The `askgate mcp` bridge reads the agent's stdin
//! with it, and askgate reads each stdio upstream's stdout with it.
//!
//! Written by hand rather than with tokio-util's `LinesCodec::new_with_max_length`: the codec
//! reports a line over the limit as `MaxLineLengthExceeded` with none of its bytes, so the
//! request it carried could not be answered with its own `id` (JSON-RPC wants an error
//! response, and the agent would wait for one); and `FramedRead` ends its stream after the
//! first error, which would end the session at one long or non-UTF-8 line.

use rmcp::model::RequestId;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// One line read by [`Lines`].
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Line {
    /// A whole line within the limit, without its line ending.
    Whole(Vec<u8>),
    /// A line over the limit, read past; what could be learned of it.
    TooLong(Oversized),
}

/// What is known of a line that was too long to keep.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Oversized {
    /// Its top-level `id`, when it has one that is a number or a string.
    pub id: Option<RequestId>,
    /// Whether it has a top-level `method`: a request or a notification, not a response.
    pub method: bool,
    /// Its length in bytes, without the line ending.
    pub bytes: u64,
}

/// Reads lines of at most `max` bytes from `R`.
///
/// Its state lives in the struct, and each read step consumes only what it has already
/// copied or scanned, so a [`Lines::next`] dropped inside a `select!` loses nothing: the next
/// call goes on with the same line.
pub(super) struct Lines<R> {
    read: BufReader<R>,
    max: usize,
    line: Vec<u8>,
    /// Set while the rest of a line over the limit is read past.
    scanning: Option<Envelope>,
}

impl<R: AsyncRead + Unpin> Lines<R> {
    /// Lines from `read`, each at most `max` bytes.
    pub(super) fn new(read: R, max: usize) -> Self {
        Self { read: BufReader::with_capacity(64 * 1024, read), max, line: Vec::new(), scanning: None }
    }

    /// The next line; none at the end of the stream (a last line without a line ending is
    /// incomplete and dropped).
    ///
    /// # Errors
    /// What reading `R` failed with.
    pub(super) async fn next(&mut self) -> std::io::Result<Option<Line>> {
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                return Ok(None);
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            let piece = &available[..newline.unwrap_or(take)];
            let mut done = None;
            if let Some(envelope) = self.scanning.as_mut() {
                envelope.feed(piece);
                if newline.is_some() {
                    done = self.scanning.take().map(|e| Line::TooLong(e.finish()));
                }
            } else if self.line.len() + piece.len() > self.max {
                let mut envelope = Envelope::default();
                envelope.feed(&self.line);
                envelope.feed(piece);
                self.line = Vec::new();
                if newline.is_some() {
                    done = Some(Line::TooLong(envelope.finish()));
                } else {
                    self.scanning = Some(envelope);
                }
            } else {
                self.line.extend_from_slice(piece);
                if newline.is_some() {
                    let mut line = std::mem::take(&mut self.line);
                    if line.last() == Some(&b'\r') {
                        line.pop();
                    }
                    done = Some(Line::Whole(line));
                }
            }
            self.read.consume(take);
            if let Some(line) = done {
                return Ok(Some(line));
            }
        }
    }
}

/// The longest top-level key kept while scanning (`method` is the longest one looked for).
const KEY_MAX: usize = 8;
/// The longest `id` kept: ids are numbers or short strings.
const ID_MAX: usize = 256;

/// Finds a JSON object's top-level `id` and `method`, fed its text in pieces, keeping only a
/// few bytes: a tokenizer of strings and nesting, not a parser. Text that is not JSON simply
/// yields no id.
#[derive(Default)]
struct Envelope {
    bytes: u64,
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// At the top level, the next string is a key.
    expect_key: bool,
    reading_key: bool,
    key: Vec<u8>,
    /// The raw text of the `id` value being read.
    capture: Option<Vec<u8>>,
    id: Option<Vec<u8>>,
    method: bool,
}

impl Envelope {
    fn feed(&mut self, piece: &[u8]) {
        self.bytes += piece.len() as u64;
        for &b in piece {
            self.step(b);
        }
    }

    fn step(&mut self, b: u8) {
        let top = self.depth == 1;
        if let Some(capture) = self.capture.as_mut() {
            let ends = top && !self.in_string && (b == b',' || b == b'}');
            if ends {
                self.id = self.capture.take();
            } else if capture.len() < ID_MAX {
                capture.push(b);
            } else {
                // Too long for an id: not one askgate can answer.
                self.capture = None;
            }
        }
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
                if self.reading_key {
                    self.reading_key = false;
                    if self.key == b"method" {
                        self.method = true;
                    }
                }
            } else if self.reading_key && self.key.len() < KEY_MAX {
                self.key.push(b);
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                if top && self.expect_key {
                    self.expect_key = false;
                    self.reading_key = true;
                    self.key.clear();
                }
            }
            b'{' | b'[' => {
                self.depth += 1;
                self.expect_key = self.depth == 1 && b == b'{';
            }
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            b',' if top => self.expect_key = true,
            b':' if top && self.key == b"id" && self.id.is_none() => self.capture = Some(Vec::new()),
            _ => {}
        }
    }

    fn finish(self) -> Oversized {
        // Only a number or a string is an id; anything else (an object, or text cut short)
        // fails to parse and leaves none.
        let id = self.id.and_then(|raw| serde_json::from_slice::<RequestId>(raw.trim_ascii()).ok());
        Oversized { id, method: self.method, bytes: self.bytes }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<Line> {
        let mut lines = Lines::new(input, max);
        let mut out = Vec::new();
        while let Some(line) = lines.next().await.unwrap() {
            out.push(line);
        }
        out
    }

    fn too_long(id: Option<RequestId>, method: bool, bytes: usize) -> Line {
        Line::TooLong(Oversized { id, method, bytes: bytes as u64 })
    }

    #[tokio::test]
    async fn lines_within_the_limit_come_whole_and_a_longer_one_is_read_past_with_its_id() {
        let big = format!(r#"{{"jsonrpc":"2.0","id":7,"result":{{"text":"{}"}}}}"#, "x".repeat(100));
        let input = format!("{{\"a\":1}}\r\n{big}\n{{\"b\":2}}\n");
        let got = lines(input.as_bytes(), 32).await;
        assert_eq!(
            got,
            [
                Line::Whole(br#"{"a":1}"#.to_vec()),
                too_long(Some(RequestId::Number(7)), false, big.len()),
                Line::Whole(br#"{"b":2}"#.to_vec()),
            ]
        );
    }

    #[tokio::test]
    async fn an_id_after_the_result_is_found_too() {
        // Some SDKs write `id` last.
        let big = format!(r#"{{"result":{{"id":1,"s":"{}\"id\":2"}},"jsonrpc":"2.0","id":"call-9"}}"#, "y".repeat(50));
        let got = lines(format!("{big}\n").as_bytes(), 16).await;
        assert_eq!(got, [too_long(Some(RequestId::String("call-9".into())), false, big.len())]);
    }

    #[tokio::test]
    async fn a_request_is_told_from_a_response_and_text_that_is_not_json_has_no_id() {
        let request =
            format!(r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"x":"{}"}}}}"#, "z".repeat(40));
        let garbage = "not json at all, just a long line";
        let got = lines(format!("{request}\n{garbage}\n").as_bytes(), 16).await;
        assert_eq!(
            got,
            [too_long(Some(RequestId::Number(3)), true, request.len()), too_long(None, false, garbage.len())]
        );
    }

    #[tokio::test]
    async fn an_id_quoted_inside_a_string_is_not_taken_for_the_id() {
        let big = format!(r#"{{"jsonrpc":"2.0","note":"a \",\"id\":5 {}","id":6,"result":{{}}}}"#, "w".repeat(40));
        let got = lines(format!("{big}\n").as_bytes(), 16).await;
        assert_eq!(got, [too_long(Some(RequestId::Number(6)), false, big.len())]);
    }

    #[tokio::test]
    async fn an_incomplete_last_line_is_dropped() {
        assert_eq!(lines(b"{\"a\":1}\n{\"b\"", 64).await, [Line::Whole(br#"{"a":1}"#.to_vec())]);
    }
}
