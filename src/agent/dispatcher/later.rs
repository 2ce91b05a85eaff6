//! Requests a helper thread answers: the dispatcher keeps them open and
//! the helper posts its result back (as an `Event::Answer`), so only the
//! dispatcher writes an answer, and a `$/cancel_request` that comes first
//! is answered -32800 while the late result is dropped.

use crate::rpc::{RequestId, RpcError};
use serde_json::Value;

/// Where a result goes: the dispatcher's event channel, as an answer to
/// the request it was made for.
pub(super) type Post = Box<dyn FnOnce(Result<Value, RpcError>) + Send>;

/// -32800, "request cancelled" (ACP's `$/cancel_request`).
pub(super) const REQUEST_CANCELLED: i64 = -32800;

/// An answer owed to the client, carried by the helper that works it out.
/// Dropped unanswered (the helper ended early), it answers with an error:
/// no request stays open for good.
pub(in crate::agent) struct Later {
    post: Option<Post>,
}

impl Later {
    /// Posts the result to the dispatcher, which answers if the request
    /// is still open.
    pub(in crate::agent) fn answer(mut self, result: Result<Value, RpcError>) {
        self.post(result);
    }

    fn post(&mut self, result: Result<Value, RpcError>) {
        if let Some(post) = self.post.take() {
            post(result);
        }
    }
}

impl Drop for Later {
    fn drop(&mut self) {
        self.post(Err(RpcError::internal(
            "the work for this request ended without an answer",
        )));
    }
}

/// The ids of the requests helpers are answering.
#[derive(Default)]
pub(super) struct Open(Vec<RequestId>);

impl Open {
    /// Opens `id`, to be answered by the [`Later`] returned.
    pub(super) fn open(&mut self, id: &RequestId, post: Post) -> Later {
        self.0.push(id.clone());
        Later { post: Some(post) }
    }

    /// Closes `id`; false when it was not open (answered, or cancelled).
    pub(super) fn close(&mut self, id: &RequestId) -> bool {
        match self.0.iter().position(|open| open == id) {
            Some(at) => {
                self.0.remove(at);
                true
            }
            None => false,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Closes them all, for the agent's end.
    pub(super) fn take_all(&mut self) -> Vec<RequestId> {
        std::mem::take(&mut self.0)
    }
}

/// The error a cancelled request is answered with.
pub(super) fn cancelled(why: Option<&str>) -> RpcError {
    let message = match why {
        Some(why) => format!("request cancelled: {why}"),
        None => "request cancelled".to_string(),
    };
    RpcError::new(REQUEST_CANCELLED, message)
}
