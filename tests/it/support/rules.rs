//! Rules of the protocol that the schema cannot see, because they depend
//! on what the client said earlier on the connection. The agent harness
//! feeds every message the test sends (`on_sent`) and every line the agent
//! writes (`on_received`, in stdout order) through one `Rules`; a broken
//! rule makes the line invalid, so it fails the test like a line that
//! breaks the schema.
//!
//! - Opt-in updates: a `notice` goes only to a client that advertised
//!   `clientCapabilities.session.notices` (or Spindle's older opt-in
//!   `_meta.spindle.notices`); `compaction_update` and
//!   `compaction_summary_chunk` only to one with `session.compaction`.
//!   Both are in the stable schema now, so it no longer catches them.

use serde_json::Value;

#[derive(Debug, Default)]
pub struct Rules {
    /// The client takes `notice` updates.
    notices: bool,
    /// The client takes the compaction updates.
    compaction: bool,
}

impl Rules {
    /// A message the test sends to the agent.
    pub fn on_sent(&mut self, message: &Value) {
        if message["method"] == "initialize" && message.get("id").is_some() {
            let capabilities = &message["params"]["clientCapabilities"];
            self.notices = capabilities["session"]["notices"].is_object()
                || capabilities["_meta"]["spindle"]["notices"] == true;
            self.compaction = capabilities["session"]["compaction"].is_object();
        }
    }

    /// A message the agent wrote (already valid by the schema); `method`
    /// is the request's when `message` is a response. `Err` says which
    /// rule it breaks.
    pub fn on_received(&mut self, message: &Value, _method: Option<&str>) -> Result<(), String> {
        if message["method"] == "session/update" {
            self.check_update(&message["params"])?;
        }
        Ok(())
    }

    fn check_update(&mut self, params: &Value) -> Result<(), String> {
        match params["update"]["sessionUpdate"].as_str() {
            Some("notice") if !self.notices => {
                Err("a `notice` update to a client that advertised neither \
                 clientCapabilities.session.notices nor _meta.spindle.notices"
                    .into())
            }
            Some(kind @ ("compaction_update" | "compaction_summary_chunk")) if !self.compaction => {
                Err(format!(
                    "a `{kind}` update to a client that did not advertise \
                     clientCapabilities.session.compaction"
                ))
            }
            _ => Ok(()),
        }
    }
}
