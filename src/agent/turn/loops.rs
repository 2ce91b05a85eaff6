//! A model that is stuck is stopped, not paid for: the same tool call
//! with the same arguments made again and again (told at the `warn`th in
//! a row, stopped at the `stop`th), or the same line, sentence or
//! paragraph streamed again and again in one answer (the answer is cut
//! at once and the turn ends: text is not told first, since the model
//! cannot hear a note in the middle of its own answer).
//!
//! Only consecutive identical calls with unchanged results count: a
//! different call, a changed result or a poll of a job still running
//! starts the count again. Both checks are linear in what they see: each
//! call is hashed once, each line, sentence and paragraph once when it
//! ends.

use super::updates::UpdateSink;
use crate::cancel::CancelToken;
use crate::config::LoopSettings;
use crate::provider::{Sink, ToolCallRequest};
use serde_json::Value;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// The shortest line, sentence or paragraph (in characters, trimmed)
/// whose repeats count: shorter ones (`}`, `---`, "Done.") recur in
/// honest answers.
pub(super) const MIN_TEXT: usize = 40;

/// The run of identical tool calls the turn has seen so far.
pub(super) struct CallStreak {
    warn: usize,
    stop: usize,
    /// The last call counted (its name and arguments) and its result.
    last: Option<(u64, u64)>,
    count: usize,
}

/// What to do with the next tool call.
#[derive(Debug, PartialEq)]
pub(super) enum Verdict {
    Run,
    /// Not run: the turn ends, saying why.
    Stop(String),
}

impl CallStreak {
    pub(super) fn new(settings: &LoopSettings) -> CallStreak {
        CallStreak {
            warn: settings.call_warn(),
            stop: settings.call_stop(),
            last: None,
            count: 0,
        }
    }

    /// Before a call runs: stopped when it would be the `stop`th
    /// identical call in a row, whose results have not changed.
    pub(super) fn before(&self, call: &ToolCallRequest) -> Verdict {
        let repeats = self.last.is_some_and(|(last, _)| last == signature(call));
        if self.stop == 0 || !repeats || self.count + 1 < self.stop {
            return Verdict::Run;
        }
        Verdict::Stop(format!(
            "The model called {} with the same arguments {} times in a row, and the result did not change; the turn stopped there, before the call ran. What was done so far is kept; send another prompt to go on (the `loops` setting changes when this happens).",
            call.name,
            self.count + 1
        ))
    }

    /// After a call ran, with its result and whether it polled a job that
    /// still runs (never a loop): the note the model gets with the
    /// result, when it repeats itself.
    pub(super) fn after(
        &mut self,
        call: &ToolCallRequest,
        result: &str,
        polling: bool,
    ) -> Option<String> {
        if polling {
            self.last = None;
            self.count = 0;
            return None;
        }
        let now = (signature(call), hash_of(result));
        self.count = if self.last == Some(now) {
            self.count + 1
        } else {
            1
        };
        self.last = Some(now);
        (self.warn > 0 && self.count >= self.warn).then(|| {
            format!(
                "You have called {} with the same arguments {} times in a row; the result will not change. Do something else or finish.",
                call.name, self.count
            )
        })
    }
}

/// A call's name and its arguments as canonical JSON (keys sorted, no
/// spaces); arguments that are not JSON are taken trimmed, as written.
fn signature(call: &ToolCallRequest) -> u64 {
    let mut hasher = DefaultHasher::new();
    call.name.hash(&mut hasher);
    match serde_json::from_str::<Value>(&call.arguments) {
        Ok(value) => canonical(&value, &mut hasher),
        Err(_) => call.arguments.trim().hash(&mut hasher),
    }
    hasher.finish()
}

fn canonical(value: &Value, hasher: &mut DefaultHasher) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            hasher.write_u8(b'{');
            for key in keys {
                key.hash(hasher);
                canonical(&map[key], hasher);
            }
            hasher.write_u8(b'}');
        }
        Value::Array(items) => {
            hasher.write_u8(b'[');
            for item in items {
                canonical(item, hasher);
            }
            hasher.write_u8(b']');
        }
        other => other.to_string().hash(hasher),
    }
}

fn hash_of(text: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

/// Whether `call` reads a background job that still runs afterwards:
/// polling it is waiting, not a loop.
pub(super) fn polls_running_job(jobs: &crate::tools::jobs::Jobs, call: &ToolCallRequest) -> bool {
    if call.name != "job_output" {
        return false;
    }
    serde_json::from_str::<Value>(&call.arguments)
        .ok()
        .and_then(|args| args.get("jobId").and_then(Value::as_str).map(str::to_owned))
        .and_then(|id| jobs.get(&id))
        .is_some_and(|info| info.state == crate::tools::jobs::JobState::Running)
}

/// Counts the lines, sentences and paragraphs of one streamed text as
/// they end; the first one seen `limit` times is the repeat.
pub(super) struct Repeats {
    limit: usize,
    /// The line so far, and where its current sentence begins.
    line: String,
    sentence: usize,
    /// The paragraph so far: its lines' hash, lines and characters.
    paragraph: (u64, usize, usize),
    seen: HashMap<(u8, u64), usize>,
}

impl Repeats {
    pub(super) fn new(limit: usize) -> Repeats {
        Repeats {
            limit,
            line: String::new(),
            sentence: 0,
            paragraph: (0, 0, 0),
            seen: HashMap::new(),
        }
    }

    /// Takes the next piece of text; the repeated text, once one has come
    /// `limit` times.
    pub(super) fn push(&mut self, delta: &str) -> Option<String> {
        if self.limit == 0 {
            return None;
        }
        for c in delta.chars() {
            if c == '\n' {
                if let Some(found) = self.end_line() {
                    return Some(found);
                }
                continue;
            }
            // A sentence ends at `.`, `!` or `?` followed by a space.
            let ends = c.is_whitespace() && self.line.ends_with(['.', '!', '?']);
            if ends {
                let found = self.count_sentence(self.line.len());
                self.sentence = self.line.len();
                if found.is_some() {
                    return found;
                }
            }
            self.line.push(c);
        }
        None
    }

    fn count_sentence(&mut self, end: usize) -> Option<String> {
        let piece = self.line[self.sentence..end].trim().to_string();
        self.count(3, &piece)
    }

    fn end_line(&mut self) -> Option<String> {
        // The last sentence of a line of several.
        let mut found = None;
        if self.sentence > 0 {
            found = self.count_sentence(self.line.len());
        }
        let line = std::mem::take(&mut self.line);
        self.sentence = 0;
        let trimmed = line.trim();
        if trimmed.is_empty() {
            let (hash, lines, chars) = std::mem::take(&mut self.paragraph);
            if found.is_none() && lines >= 2 && chars >= MIN_TEXT {
                found = self.bump((2, hash), "the same paragraph");
            }
            return found;
        }
        let (hash, lines, chars) = self.paragraph;
        let mut hasher = DefaultHasher::new();
        hasher.write_u64(hash);
        trimmed.hash(&mut hasher);
        self.paragraph = (hasher.finish(), lines + 1, chars + trimmed.chars().count());
        found.or_else(|| self.count(1, trimmed))
    }

    fn count(&mut self, kind: u8, text: &str) -> Option<String> {
        if text.chars().count() < MIN_TEXT {
            return None;
        }
        self.bump((kind, hash_of(text)), text)
    }

    fn bump(&mut self, key: (u8, u64), shown: &str) -> Option<String> {
        let seen = self.seen.entry(key).or_insert(0);
        *seen += 1;
        (*seen >= self.limit).then(|| shown.chars().take(120).collect())
    }
}

/// The sink of one model call, watching its text and thoughts for
/// repeats: at the first, the call is cancelled (through `call`, its own
/// token) and nothing more of it is shown.
pub(super) struct Watched<'w, 'a> {
    pub(super) sink: &'w mut UpdateSink<'a>,
    text: Repeats,
    thought: Repeats,
    call: CancelToken,
    /// What was repeated, once something was.
    pub(super) repeated: Option<String>,
}

impl<'w, 'a> Watched<'w, 'a> {
    pub(super) fn new(sink: &'w mut UpdateSink<'a>, limit: usize, call: CancelToken) -> Self {
        Watched {
            sink,
            text: Repeats::new(limit),
            thought: Repeats::new(limit),
            call,
            repeated: None,
        }
    }

    fn trip(&mut self, found: Option<String>) {
        if let Some(found) = found {
            self.repeated = Some(found);
            self.call.cancel();
        }
    }
}

impl Sink for Watched<'_, '_> {
    fn text(&mut self, delta: &str) {
        if self.repeated.is_none() {
            self.sink.text(delta);
            let found = self.text.push(delta);
            self.trip(found);
        }
    }

    fn thought(&mut self, delta: &str) {
        if self.repeated.is_none() {
            self.sink.thought(delta);
            let found = self.thought.push(delta);
            self.trip(found);
        }
    }

    fn notice(&mut self, text: &str) {
        self.sink.notice(text);
    }

    fn retrying(&mut self, text: &str, until_ms: i64) {
        self.sink.retrying(text, until_ms);
    }

    fn more_waiting(&mut self, more: bool) {
        self.sink.more_waiting(more);
    }
}

/// A token for one model call: cancelled with the turn, or alone.
pub(super) fn call_token(turn: &CancelToken) -> CancelToken {
    let call = CancelToken::new();
    let linked = call.clone();
    turn.on_cancel(move || linked.cancel());
    call
}

/// Ends the turn for a loop: a notice, and the same words as the turn's
/// last text (kept, so a replay shows why it stopped).
pub(super) fn say_stopped(sink: &mut UpdateSink, why: &str) {
    sink.updates
        .borrow_mut()
        .notice(&crate::acp::fit::Notice::warning(
            "The turn stopped: the model repeats itself",
            why,
        ));
    sink.begin_message();
    let text = format!("_{}_", why.replace('_', "\\_"));
    sink.updates
        .borrow_mut()
        .chunk(false, &sink.message_id, &text);
}

/// The words for an answer cut for a repeat.
/// What the model is told the first time an answer of its repeats itself.
pub(super) fn text_note(what: &str, limit: usize) -> String {
    format!(
        "[Your last answer repeated the same text {limit} times (\"{what}\") and was cut there. Do not repeat it: go on from where the useful part ended, or finish.]"
    )
}

pub(super) fn text_repeated(what: &str, limit: usize) -> String {
    format!(
        "The model's answer repeated the same text {limit} times (\"{what}\") again after it was told, so it was cut there and the turn stopped. What was written so far is kept; send another prompt to go on (the `loops` setting changes when this happens)."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, arguments: &str) -> ToolCallRequest {
        ToolCallRequest {
            id: "c".into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    fn streak(warn: usize, stop: usize) -> CallStreak {
        CallStreak::new(&LoopSettings {
            same_call_warn: Some(warn),
            same_call_stop: Some(stop),
            same_text_stop: None,
        })
    }

    /// Runs `calls` (each with its result) while they may run: the notes
    /// the model got, and the index of the call stopped, if one was.
    fn play(
        streak: &mut CallStreak,
        calls: &[(ToolCallRequest, &str)],
    ) -> (Vec<usize>, Option<usize>) {
        let mut told = Vec::new();
        for (index, (call, result)) in calls.iter().enumerate() {
            if let Verdict::Stop(why) = streak.before(call) {
                assert!(why.contains(&call.name), "{why}");
                return (told, Some(index));
            }
            if let Some(note) = streak.after(call, result, false) {
                assert!(
                    note.contains(&call.name) && note.contains("same arguments"),
                    "{note}"
                );
                told.push(index);
            }
        }
        (told, None)
    }

    #[test]
    fn the_same_call_is_told_at_the_third_and_stopped_at_the_fifth() {
        let read = call("read_file", r#"{"path": "a.rs", "offset": 1}"#);
        let calls = vec![(read, "fn main() {}"); 6];
        let (told, stopped) = play(&mut streak(3, 5), &calls);
        assert_eq!(told, vec![2, 3]);
        assert_eq!(stopped, Some(4));
    }

    #[test]
    fn arguments_are_compared_as_canonical_json() {
        let mut streak = streak(2, 3);
        let calls = vec![
            (call("read_file", r#"{"path":"a.rs","offset":1}"#), "x"),
            (call("read_file", r#"{ "offset": 1, "path": "a.rs" }"#), "x"),
            (call("read_file", "{\"offset\":1,\n\"path\":\"a.rs\"}"), "x"),
        ];
        assert_eq!(play(&mut streak, &calls), (vec![1], Some(2)));
        // Another tool with the same arguments is another call.
        assert_eq!(
            streak.before(&call("list_directory", r#"{"path":"a.rs","offset":1}"#)),
            Verdict::Run
        );
    }

    #[test]
    fn different_calls_changed_results_and_interleaved_calls_are_not_loops() {
        let cases: Vec<Vec<(ToolCallRequest, &str)>> = vec![
            // Different files.
            (0..8)
                .map(|i| (call("read_file", &format!(r#"{{"path":"f{i}.rs"}}"#)), "x"))
                .collect(),
            // The same command after an edit each time.
            (0..8)
                .flat_map(|i| {
                    [
                        (call("run_command", r#"{"command":"cargo test"}"#), "failed"),
                        (
                            call("edit_file", &format!(r#"{{"path":"a.rs","n":{i}}}"#)),
                            "ok",
                        ),
                    ]
                })
                .collect(),
            // A result that changes each time.
            ["1", "2", "3", "4", "5", "6", "7"]
                .iter()
                .map(|r| (call("run_command", r#"{"command":"date"}"#), *r))
                .collect(),
        ];
        for calls in cases {
            assert_eq!(play(&mut streak(3, 5), &calls), (vec![], None));
        }
    }

    #[test]
    fn polling_a_running_job_is_not_counted() {
        let mut streak = streak(3, 5);
        let poll = call("job_output", r#"{"jobId":"j1"}"#);
        for _ in 0..10 {
            assert_eq!(streak.before(&poll), Verdict::Run);
            assert_eq!(
                streak.after(&poll, "(no new output)\n[job j1: running]", true),
                None
            );
        }
        // Once it ended, reading it again and again is a loop.
        for _ in 0..4 {
            assert_eq!(streak.before(&poll), Verdict::Run);
            streak.after(&poll, "[job j1: exited, exit code 0]", false);
        }
        assert!(matches!(streak.before(&poll), Verdict::Stop(_)));
    }

    #[test]
    fn zero_turns_a_call_check_off() {
        let calls = vec![(call("glob", r#"{"pattern":"*"}"#), "a"); 20];
        assert_eq!(play(&mut streak(0, 0), &calls), (vec![], None));
        let (told, stopped) = play(&mut streak(0, 4), &calls);
        assert!(told.is_empty());
        assert_eq!(stopped, Some(3));
        let (told, stopped) = play(&mut streak(2, 0), &calls);
        assert_eq!(told.len(), 19);
        assert_eq!(stopped, None);
    }

    const LINE: &str = "I will now read the file again to check what is in it.";

    /// Streams `text` in pieces of `size` characters: where it tripped.
    fn stream(limit: usize, text: &str, size: usize) -> Option<(String, usize)> {
        let mut repeats = Repeats::new(limit);
        let chars: Vec<char> = text.chars().collect();
        let mut sent = 0;
        for piece in chars.chunks(size) {
            let piece: String = piece.iter().collect();
            sent += piece.chars().count();
            if let Some(found) = repeats.push(&piece) {
                return Some((found, sent));
            }
        }
        None
    }

    #[test]
    fn a_line_streamed_ten_times_trips_at_the_tenth_whatever_the_pieces() {
        let text = format!("{LINE}\n").repeat(12);
        for size in [1, 3, 7, 1000] {
            let (found, sent) = stream(10, &text, size).expect("tripped");
            assert_eq!(found, LINE);
            let tenth = (LINE.chars().count() + 1) * 10;
            assert!(sent >= tenth && sent < tenth + size, "{size}: {sent}");
        }
        assert_eq!(stream(10, &format!("{LINE}\n").repeat(9), 5), None);
        assert_eq!(stream(0, &format!("{LINE}\n").repeat(50), 5), None);
    }

    #[test]
    fn a_sentence_repeated_on_one_line_trips() {
        let text = format!("{LINE} ").repeat(11);
        let (found, _) = stream(10, &text, 4).expect("tripped");
        assert_eq!(found, LINE);
    }

    #[test]
    fn a_paragraph_of_short_lines_repeated_trips() {
        let paragraph = "Let me see.\nI read it.\nIt is the same.\nSo again.\n\n";
        let (found, _) = stream(10, &paragraph.repeat(10), 3).expect("tripped");
        assert_eq!(found, "the same paragraph");
        assert_eq!(stream(10, &paragraph.repeat(9), 3), None);
    }

    #[test]
    fn honest_answers_do_not_trip() {
        // Short lines repeat often; long ones that differ do not count.
        let mut text = String::new();
        for i in 0..200 {
            text.push_str("    }\n\n---\n| a | b |\n");
            text.push_str(&format!(
                "Step {i}: the function handles case number {i} of the input.\n"
            ));
        }
        assert_eq!(stream(10, &text, 9), None);
    }
}
