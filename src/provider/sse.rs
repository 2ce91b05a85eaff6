//! Server-sent events: the framing all three provider wire formats stream
//! in. A small incremental parser fed one line at a time, following the
//! WHATWG rules the providers rely on (comments, multi-line data, a blank
//! line dispatches, an incomplete event at EOF is dropped).

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` name, when the server sent one.
    pub event: Option<String>,
    pub data: String,
}

/// What one line meant.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// A complete event was dispatched by this (blank) line.
    Event(SseEvent),
    /// A comment (keep-alive): no event, but proof of life.
    Comment,
    /// A field line that was buffered, or a blank line with nothing pending.
    Pending,
    /// The event being built grew past `EVENT_CAP`: the stream is refused.
    TooLarge,
}

/// The most bytes of one SSE line. Real events are small (a few tokens);
/// the largest are the Responses API's terminal events, which repeat the
/// whole response (itself within `http::RESPONSE_CAP`).
pub(crate) const LINE_CAP: usize = 8 * 1024 * 1024;
/// The most bytes of data one event may carry (all its `data:` lines).
pub(crate) const EVENT_CAP: usize = 8 * 1024 * 1024;

/// The largest event buffer kept for the next event (`recycle`, and the
/// turn's side of a stream): a huge event's is let go.
pub(crate) const RECYCLED: usize = 64 * 1024;

#[derive(Debug, Default)]
pub(crate) struct SseParser {
    data: String,
    has_data: bool,
    event: Option<String>,
    started: bool,
    /// The most data one event may carry (`EVENT_CAP` unless set).
    event_cap: Option<usize>,
}

impl SseParser {
    pub(crate) fn new() -> SseParser {
        SseParser::default()
    }

    /// A parser whose events may carry at most `cap` bytes of data.
    pub(crate) fn with_event_cap(cap: usize) -> SseParser {
        SseParser {
            event_cap: Some(cap),
            ..SseParser::default()
        }
    }

    /// Feeds one line, without its terminator (a trailing `\r` is allowed
    /// and removed).
    pub(crate) fn line(&mut self, line: &[u8]) -> Line {
        let mut line = line.strip_suffix(b"\r").unwrap_or(line);
        if !self.started {
            self.started = true;
            line = line.strip_prefix("\u{feff}".as_bytes()).unwrap_or(line);
        }
        if line.is_empty() {
            return match self.dispatch() {
                Some(event) => Line::Event(event),
                None => Line::Pending,
            };
        }
        if line[0] == b':' {
            return Line::Comment;
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match name {
            b"data" => {
                if self.data.len() + value.len() + 1 > self.event_cap.unwrap_or(EVENT_CAP) {
                    self.data = String::new();
                    self.has_data = false;
                    return Line::TooLarge;
                }
                // Room for the line at once (the data of most events is
                // one line), not grown in steps.
                self.data.reserve(value.len() + 1);
                self.data.push_str(&String::from_utf8_lossy(value));
                self.data.push('\n');
                self.has_data = true;
            }
            b"event" => self.event = Some(String::from_utf8_lossy(value).into_owned()),
            _ => {}
        }
        Line::Pending
    }

    /// Gives back a dispatched event's buffer: the next event's data is
    /// written into it rather than into a new one.
    pub(crate) fn recycle(&mut self, mut buffer: String) {
        if self.data.capacity() == 0 && buffer.capacity() <= RECYCLED {
            buffer.clear();
            self.data = buffer;
        }
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = self.event.take();
        if !self.has_data {
            return None;
        }
        self.has_data = false;
        let mut data = std::mem::take(&mut self.data);
        data.pop();
        Some(SseEvent { event, data })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_over_the_cap_is_refused() {
        let mut parser = SseParser::new();
        let line = format!("data: {}", "y".repeat(1024 * 1024));
        let mut refused = false;
        for _ in 0..(EVENT_CAP / (1024 * 1024) + 2) {
            if parser.line(line.as_bytes()) == Line::TooLarge {
                refused = true;
                break;
            }
        }
        assert!(refused);
        // The parser starts afresh after the refusal.
        assert_eq!(parser.line(b"data: ok"), Line::Pending);
        assert!(matches!(parser.line(b""), Line::Event(e) if e.data == "ok"));
    }

    fn feed(text: &str) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        for line in text.split('\n') {
            if let Line::Event(event) = parser.line(line.as_bytes()) {
                events.push(event);
            }
        }
        events
    }

    #[test]
    fn parses_events_comments_and_multiline_data() {
        let events = feed(
            "\u{feff}: keepalive\r\nevent: ping\r\ndata: {\"a\":1}\r\n\r\ndata:x\ndata: y\n\n\n",
        );
        assert_eq!(
            events,
            vec![
                SseEvent {
                    event: Some("ping".into()),
                    data: "{\"a\":1}".into()
                },
                SseEvent {
                    event: None,
                    data: "x\ny".into()
                },
            ]
        );
    }

    #[test]
    fn incomplete_event_is_not_dispatched() {
        assert!(feed("data: partial").is_empty());
        assert!(feed("event: only\n\n").is_empty());
    }
}
