//! The reader and writer threads: the only code that touches the agent's
//! input and output streams.
//!
//! Both work on any `Read`/`Write`, so the same code serves stdin/stdout in
//! production and in-memory pipes in unit tests.

use super::{classify, Incoming, RpcError};
use crossbeam_channel::{Receiver, Sender};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::thread::{self, JoinHandle};

/// The largest line we accept: big enough for pasted images (base64) and
/// long embedded files, small enough that a runaway client cannot exhaust
/// memory.
pub(crate) const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// What the reader thread reports.
#[derive(Debug)]
pub(crate) enum Input {
    Message(Incoming),
    /// The input stream ended (or failed): the client is gone.
    Eof,
}

/// Starts the reader thread. It classifies each non-empty line and sends it
/// on `sink`; it ends after sending `Input::Eof` or when nobody listens.
pub(crate) fn spawn_reader<R, T>(input: R, sink: Sender<T>) -> io::Result<JoinHandle<()>>
where
    R: Read + Send + 'static,
    T: From<Input> + Send + 'static,
{
    thread::Builder::new()
        .name("spindle-reader".into())
        .spawn(move || read_loop(input, &sink))
}

fn read_loop<R: Read, T: From<Input>>(input: R, sink: &Sender<T>) {
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    let mut line = Vec::with_capacity(4096);
    loop {
        line.clear();
        let read = (&mut reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line);
        match read {
            Ok(0) => break,
            Ok(_) => {}
            Err(err) => {
                log::error!("reading stdin failed: {err}");
                break;
            }
        }
        let message = if line.len() > MAX_LINE_BYTES && line.last() != Some(&b'\n') {
            if skip_rest_of_line(&mut reader).is_err() {
                break;
            }
            Incoming::Invalid {
                id: serde_json::Value::Null,
                error: RpcError::invalid_request(format!(
                    "message longer than {} MiB",
                    MAX_LINE_BYTES / (1024 * 1024)
                )),
            }
        } else {
            let trimmed = trim_ascii(&line);
            if trimmed.is_empty() {
                continue;
            }
            if log::log_enabled!(log::Level::Debug) {
                log::debug!("<- {}", redacted(trimmed));
            }
            classify(trimmed)
        };
        if sink.send(T::from(Input::Message(message))).is_err() {
            return;
        }
        // Give back the memory of one huge line instead of keeping it.
        if line.capacity() > 1024 * 1024 {
            line = Vec::with_capacity(4096);
        }
    }
    let _ = sink.send(T::from(Input::Eof));
}

/// A line as it may be logged: the values of every `env` and `headers`
/// entry (MCP server secrets) replaced by `***`.
fn redacted(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    if !text.contains("\"env\"") && !text.contains("\"headers\"") {
        return text.into_owned();
    }
    match serde_json::from_slice::<serde_json::Value>(line) {
        Ok(mut value) => {
            redact(&mut value);
            value.to_string()
        }
        Err(_) => "(a line holding secrets, not shown)".to_string(),
    }
}

fn redact(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            for (key, inner) in map.iter_mut() {
                if key == "env" || key == "headers" {
                    match inner {
                        Value::Array(items) => {
                            for item in items {
                                if let Some(secret) = item.get_mut("value") {
                                    *secret = Value::String("***".into());
                                }
                            }
                        }
                        Value::Object(entries) => {
                            for secret in entries.values_mut() {
                                *secret = Value::String("***".into());
                            }
                        }
                        _ => {}
                    }
                } else {
                    redact(inner);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact),
        _ => {}
    }
}

fn skip_rest_of_line<R: BufRead>(reader: &mut R) -> io::Result<()> {
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok(());
        }
        if let Some(position) = buffer.iter().position(|&b| b == b'\n') {
            reader.consume(position + 1);
            return Ok(());
        }
        let length = buffer.len();
        reader.consume(length);
    }
}

fn trim_ascii(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |p| p + 1);
    &bytes[start..end]
}

/// What the writer thread is asked to do.
#[derive(Debug)]
pub(crate) enum Output {
    /// One serialised message, without its newline; or several joined by
    /// newlines (a turn's lines held during a burst, `Updates::hold`).
    Line(String),
    /// Flush and stop, even if some sender is still alive.
    Close,
}

/// Starts the writer thread. It writes each line it receives followed by a
/// newline and flushes whenever its queue is empty, so bursts cost one
/// syscall while a lone message still leaves at once. It ends on
/// `Output::Close`, when every sender is dropped, or when the output fails
/// (a client that went away).
/// A message for the writer, stamped with when it was queued.
#[derive(Debug)]
pub(crate) struct Queued(u64, Output);

// Global: one order for every message queued, by any thread, to either
// queue; an atomic counter and nothing else.
static NEXT_STAMP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Output {
    /// Stamps the message right before it is sent: a message queued after
    /// another was (by any thread) gets a later stamp.
    pub(crate) fn queued(self) -> Queued {
        let stamp = NEXT_STAMP.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Queued(stamp, self)
    }

    /// The message back, to send again after a failed try.
    pub(crate) fn from_queued(queued: Queued) -> Output {
        queued.1
    }
}

/// Starts the writer. `lines` carries the dispatcher's messages (answers,
/// replays; `Output::Close` ends the writer); `streamed` carries what turn
/// workers stream, through a bounded queue, so a client that reads slowly
/// makes the workers wait instead of the queue grow. The two are merged in
/// the order their messages were queued (by stamp), so whatever one thread
/// queued before it caused another to queue is written first: a new
/// session's answer before its first turn's updates, a turn's updates
/// before its prompt's answer.
pub(crate) fn spawn_writer<W>(
    output: W,
    lines: Receiver<Queued>,
    streamed: Receiver<Queued>,
) -> io::Result<JoinHandle<()>>
where
    W: Write + Send + 'static,
{
    thread::Builder::new()
        .name("spindle-writer".into())
        .spawn(move || {
            if let Err(err) = write_loop(output, &lines, &streamed) {
                log::warn!("writing stdout failed, output stops here: {err}");
            }
        })
}

fn write_loop<W: Write>(
    output: W,
    lines: &Receiver<Queued>,
    streamed: &Receiver<Queued>,
) -> io::Result<()> {
    let mut output = io::BufWriter::with_capacity(64 * 1024, output);
    let mut from_lines: Option<Queued> = None;
    let mut from_streamed: Option<Queued> = None;
    let mut streamed_open = true;
    loop {
        if from_lines.is_none() {
            from_lines = lines.try_recv().ok();
        }
        if from_streamed.is_none() && streamed_open {
            from_streamed = streamed.try_recv().ok();
        }
        let next = match (from_lines.take(), from_streamed.take()) {
            (Some(a), Some(b)) if a.0 < b.0 => {
                from_streamed = Some(b);
                a
            }
            (Some(a), Some(b)) => {
                from_lines = Some(a);
                b
            }
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (None, None) => {
                // Nothing queued: flush, then wait for either side.
                output.flush()?;
                let never = crossbeam_channel::never();
                let streamed_or_never = if streamed_open { streamed } else { &never };
                crossbeam_channel::select! {
                    recv(lines) -> message => match message {
                        Ok(message) => from_lines = Some(message),
                        Err(_) => return output.flush(),
                    },
                    recv(streamed_or_never) -> message => match message {
                        Ok(message) => from_streamed = Some(message),
                        Err(_) => streamed_open = false,
                    },
                }
                continue;
            }
        };
        match next.1 {
            Output::Line(line) => write_line(&mut output, &line)?,
            Output::Close => return output.flush(),
        }
    }
}

fn write_line<W: Write>(output: &mut W, line: &str) -> io::Result<()> {
    if log::log_enabled!(log::Level::Debug) {
        log::debug!("-> {line}");
    }
    output.write_all(line.as_bytes())?;
    output.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn secrets_are_redacted_from_logged_lines() {
        let line = br#"{"method":"session/new","params":{"mcpServers":[{"name":"a","env":[{"name":"K","value":"s3cret"}]},{"type":"http","headers":{"Authorization":"Bearer t0ken"}}]}}"#;
        let logged = redacted(line);
        assert!(
            !logged.contains("s3cret") && !logged.contains("t0ken"),
            "{logged}"
        );
        assert!(logged.contains("\"K\""), "{logged}");
    }

    #[test]
    fn reader_classifies_lines_and_reports_eof() {
        let input = b"{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\n\n  \nnot json\r\n".to_vec();
        let (sender, receiver) = crossbeam_channel::unbounded::<Input>();
        spawn_reader(io::Cursor::new(input), sender)
            .unwrap()
            .join()
            .unwrap();
        let got: Vec<Input> = receiver.iter().collect();
        assert_eq!(got.len(), 3);
        assert!(matches!(
            got[0],
            Input::Message(Incoming::Notification { .. })
        ));
        assert!(matches!(got[1], Input::Message(Incoming::Invalid { .. })));
        assert!(matches!(got[2], Input::Eof));
    }

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn writer_writes_one_line_per_message() {
        let shared = Shared::default();
        let (sender, receiver) = crossbeam_channel::unbounded();
        let (_streamer, streamed) = crossbeam_channel::bounded(4);
        let handle = spawn_writer(shared.clone(), receiver, streamed).unwrap();
        let send = |output: Output| sender.send(output.queued()).unwrap();
        send(Output::Line("{\"a\":1}".to_string()));
        send(Output::Line("{\"b\":2}".to_string()));
        send(Output::Close);
        send(Output::Line("late".to_string()));
        handle.join().unwrap();
        assert_eq!(
            String::from_utf8(shared.0.lock().unwrap().clone()).unwrap(),
            "{\"a\":1}\n{\"b\":2}\n"
        );
    }

    #[test]
    fn both_queues_are_written_in_the_order_they_were_queued() {
        let shared = Shared::default();
        let (sender, receiver) = crossbeam_channel::unbounded();
        let (streamer, streamed) = crossbeam_channel::bounded(8);
        sender.send(Output::Line("first".into()).queued()).unwrap();
        for n in 0..5 {
            streamer
                .send(Output::Line(format!("u{n}")).queued())
                .unwrap();
        }
        sender.send(Output::Line("answer".into()).queued()).unwrap();
        sender.send(Output::Close.queued()).unwrap();
        let handle = spawn_writer(shared.clone(), receiver, streamed).unwrap();
        handle.join().unwrap();
        assert_eq!(
            String::from_utf8(shared.0.lock().unwrap().clone()).unwrap(),
            "first\nu0\nu1\nu2\nu3\nu4\nanswer\n"
        );
    }
}
