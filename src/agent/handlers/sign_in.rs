//! A session's MCP server that needs sign-in, offered to the editor: when
//! the editor takes URL elicitations, the sign-in starts on a helper
//! thread (`spindle-mcp-signin`), its URL goes to the editor as a
//! session-scoped `elicitation/create` in URL mode, and once the browser
//! has come back the tokens are kept and the server connected; what it
//! then has to say is posted to the dispatcher, which writes it. Without
//! that capability the session's notice says to run `spindle mcp login`.

use crate::acp::fit::Notice;
use crate::acp::method;
use crate::agent::dispatcher::{Dispatcher, Event};
use crate::agent::turn::report::{Outbox, OutgoingRequest, Report};
use crate::cancel::CancelToken;
use crate::mcp::{oauth, McpSession};
use serde_json::json;
use std::sync::Arc;

/// How a sign-in ended, for the editor.
enum Done {
    /// The elicitation's id (`signin-SERVER-…`).
    SignedIn(String),
    /// The server, and why (never a token: the reasons name endpoints
    /// and error codes only).
    Failed(String, String),
}

type Tell = Arc<dyn Fn(&str, Done) + Send + Sync>;

/// The server a sign-in's elicitation id names.
fn servers_name(id: &str) -> &str {
    id.strip_prefix("signin-")
        .and_then(|rest| rest.rsplit_once('-'))
        .map_or(id, |(name, _)| name)
}

/// A reason fit for a notice: no control characters, within a size.
fn plain(reason: &str) -> String {
    reason
        .chars()
        .filter(|c| !c.is_control())
        .take(400)
        .collect()
}

/// Offers sign-in for the servers of `names` (those that answered
/// that they need it) of session `session_id`.
pub(super) fn offer_sign_in(
    d: &Dispatcher,
    session_id: &str,
    mcp: Option<Arc<McpSession>>,
    names: Vec<String>,
) {
    let takes_urls = d.client().is_some_and(|client| client.elicitation.url);
    let Some(mcp) = mcp.filter(|_| takes_urls) else {
        return;
    };
    for name in names {
        let Some((url, file)) = mcp.sign_in_target(&name) else {
            continue;
        };
        let (outbox, session, servers) = (d.outbox(), session_id.to_string(), mcp.clone());
        let trust = d.mcp_trust();
        // The lines it has for the editor when done
        // (`elicitation/complete`, a notice), posted to the dispatcher.
        let (events, capabilities) = (d.events(), d.capabilities());
        let tell: Tell = Arc::new(move |session: &str, done: Done| {
            let lines = match done {
                Done::SignedIn(id) => vec![
                    crate::rpc::notification_line(
                        method::ELICITATION_COMPLETE,
                        &json!({"elicitationId": id}),
                    ),
                    Notice::info(
                        format!("MCP server `{}` is signed in", servers_name(&id)),
                        "its tools are offered from the next model call",
                    )
                    .line(session, &capabilities),
                ],
                Done::Failed(server, why) => vec![Notice::warning(
                    format!("Sign-in to MCP server `{server}` did not finish"),
                    why,
                )
                .line(session, &capabilities)],
            };
            let _ = events.send(Event::Lines(lines));
        });
        // Detached: it ends when the browser comes back, the editor
        // declines, the session's servers stop or the wait runs out.
        let spawned = std::thread::Builder::new()
            .name("spindle-mcp-signin".into())
            .spawn(move || sign_in(outbox, tell, session, servers, (name, url, file), trust));
        if let Err(error) = spawned {
            log::warn!("cannot start a sign-in: {error}");
        }
    }
}

fn sign_in(
    outbox: Outbox,
    tell: Tell,
    session_id: String,
    mcp: Arc<McpSession>,
    (name, url, file): (String, String, std::path::PathBuf),
    trust: crate::net::Trust,
) {
    let pending = match oauth::begin(&url, &oauth::ClientChoice::default(), &trust) {
        Ok(pending) => pending,
        Err(error) => {
            log::info!("MCP server `{name}`: sign-in cannot start: {error}");
            tell(&session_id, Done::Failed(name, plain(&error.to_string())));
            return;
        }
    };
    let (reply, answer) = crossbeam_channel::bounded(1);
    let elicitation_id = format!("signin-{name}-{}", crate::util::random_hex());
    let session = session_id.clone();
    let params = json!({
        "sessionId": session_id,
        "mode": "url",
        "message": format!("MCP server `{name}` asks you to sign in before Spindle can use it."),
        "elicitationId": elicitation_id,
        "url": pending.authorization_url(),
    });
    let asked = outbox(Report::Request(OutgoingRequest {
        session_id,
        method: method::ELICITATION_CREATE,
        params,
        reply,
        lasting: true,
    }));
    if !asked {
        return;
    }
    let cancel = CancelToken::new();
    let on_stop = cancel.clone();
    mcp.stopped().on_cancel(move || on_stop.cancel());
    let on_answer = cancel.clone();
    // Detached: ends with the editor's answer, or when the request is
    // dropped (the session forgotten, the client gone).
    let _ = std::thread::Builder::new()
        .name("spindle-mcp-signin-answer".into())
        .spawn(move || {
            let accepted = matches!(answer.recv(), Ok(Ok(value)) if value["action"] == "accept");
            if !accepted {
                on_answer.cancel();
            }
        });
    match pending.finish(oauth::CALLBACK_WAIT, &cancel) {
        Ok(tokens) => match oauth::store::save(&file, &tokens) {
            Ok(()) if mcp.reconnect(&name) => {
                log::info!("MCP server `{name}`: signed in");
                tell(&session, Done::SignedIn(elicitation_id));
            }
            Ok(()) => tell(
                &session,
                Done::Failed(
                    name,
                    "signed in, but the server still cannot be reached".into(),
                ),
            ),
            Err(error) => {
                log::warn!("MCP server `{name}`: {error}");
                tell(&session, Done::Failed(name, plain(&error.to_string())));
            }
        },
        // A decline or a cancel is the user's own choice: nothing to say.
        Err(_) if cancel.is_cancelled() => {
            log::info!("MCP server `{name}`: sign-in was not taken up")
        }
        Err(error) => {
            log::info!("MCP server `{name}`: sign-in ended: {error}");
            tell(&session, Done::Failed(name, plain(&error.to_string())));
        }
    }
}
