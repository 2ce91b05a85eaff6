//! The lines of `spindle doctor`'s report: ok, warn, FAIL with its fix,
//! and section titles, every quoted text written out harmlessly.

use std::fmt::Write;

pub(super) struct Lines {
    pub(super) text: String,
    pub(super) broken: bool,
}

/// What a line of the report quotes: names, paths, commands, skills'
/// descriptions, servers' answers — much of it a repository's or a
/// server's text. Written out on one line, so none of it can act on the
/// terminal or start a line that looks like a check of its own.
pub(super) fn shown(text: &str) -> String {
    crate::util::visible(text, false)
}

impl Lines {
    pub(super) fn ok(&mut self, what: &str, detail: &str) {
        let _ = writeln!(self.text, "  ok    {}: {}", shown(what), shown(detail));
    }
    pub(super) fn warn(&mut self, what: &str, detail: &str) {
        let _ = writeln!(self.text, "  warn  {}: {}", shown(what), shown(detail));
    }
    pub(super) fn bad(&mut self, what: &str, detail: &str, fix: &str) {
        self.broken = true;
        let _ = writeln!(
            self.text,
            "  FAIL  {}: {}\n        → {}",
            shown(what),
            shown(detail),
            shown(fix)
        );
    }
    pub(super) fn section(&mut self, title: &str) {
        let _ = writeln!(self.text, "\n{title}");
    }
}
