//! The one table from method name to handler, for the stable ACP methods
//! and the vendor ones alike ([`ROUTES`]), and the discovery object
//! derived from it (`agentCapabilities._meta.spindle`,
//! `_spindle/capabilities`): a vendor method is advertised exactly when
//! it is served.

use super::ext_params::decode;
use crate::acp::method;
use crate::acp::spindle::results::{to_json, SteerResult};
use crate::agent::dispatcher::Dispatcher;
use crate::rpc::{RequestId, RpcError};
use serde_json::{json, Map, Value};

/// How a method is answered.
pub(super) enum Handler {
    /// Now, from the params as sent (the stable methods).
    Now(fn(&mut Dispatcher, Value) -> Result<Value, RpcError>),
    /// Now, a vendor method: missing params read as `{}`, and params that
    /// are not an object are refused before the handler runs. The handler
    /// decodes them into its method's type (`ext_params::decode`).
    Vendor(fn(&mut Dispatcher, &Value) -> Result<Value, RpcError>),
    /// Now, or later by a thread or a turn (`None`: the answer comes
    /// later, for the request's id).
    Later(fn(&mut Dispatcher, &RequestId, Value) -> Option<Result<Value, RpcError>>),
}

/// One method: its name, its discovery key (vendor methods; `None` for
/// the stable ones and the test hook) and its handler.
pub(super) struct Route {
    pub(super) method: &'static str,
    pub(super) key: Option<&'static str>,
    pub(super) handler: Handler,
}

const fn stable(method: &'static str, handler: Handler) -> Route {
    Route {
        method,
        key: None,
        handler,
    }
}

const fn vendor(key: &'static str, method: &'static str, handler: Handler) -> Route {
    Route {
        method,
        key: Some(key),
        handler,
    }
}

/// The method that panics the dispatcher, for the crash tests; served
/// only with test hooks on, never advertised.
pub(super) const TEST_PANIC: &str = "_spindle/test/panic";

/// Every method this build serves.
pub(super) const ROUTES: &[Route] = &[
    stable(method::INITIALIZE, Handler::Now(Dispatcher::initialize)),
    stable(method::AUTHENTICATE, Handler::Now(Dispatcher::authenticate)),
    stable(method::LOGOUT, Handler::Now(Dispatcher::logout)),
    stable(method::SESSION_SET_MODE, Handler::Now(Dispatcher::set_mode)),
    stable(
        method::SESSION_SET_CONFIG_OPTION,
        Handler::Now(Dispatcher::set_config_option),
    ),
    stable(method::SESSION_NEW, Handler::Now(Dispatcher::new_session)),
    stable(
        method::SESSION_LOAD,
        Handler::Now(|d, params| d.load_session(params, true)),
    ),
    stable(
        method::SESSION_RESUME,
        Handler::Now(|d, params| d.load_session(params, false)),
    ),
    stable(
        method::SESSION_LIST,
        Handler::Now(Dispatcher::list_sessions),
    ),
    stable(
        method::SESSION_CLOSE,
        Handler::Now(Dispatcher::close_session),
    ),
    stable(method::SESSION_FORK, Handler::Now(Dispatcher::fork_session)),
    stable(
        method::SESSION_SET_MODEL,
        Handler::Now(Dispatcher::set_model),
    ),
    stable(
        method::SESSION_DELETE,
        Handler::Now(Dispatcher::delete_session),
    ),
    // Unstable ACP (`sessionCapabilities.title`, `.status`).
    stable(
        method::SESSION_SET_TITLE,
        Handler::Now(Dispatcher::set_title),
    ),
    stable(
        method::SESSION_STATUS,
        Handler::Now(Dispatcher::session_status),
    ),
    // A turn answers.
    stable(
        method::SESSION_PROMPT,
        Handler::Later(|d, id, params| d.prompt(id, params).err().map(Err)),
    ),
    vendor(
        "capabilities",
        "_spindle/capabilities",
        Handler::Vendor(|_, _| Ok(capabilities())),
    ),
    vendor(
        "status",
        "_spindle/session/status",
        Handler::Vendor(|d, params| d.status(decode(d, params)?)),
    ),
    vendor(
        "steer",
        "_spindle/session/steer",
        Handler::Vendor(|d, params| {
            d.steer(decode(d, params)?).map(|(item_id, disposition)| {
                to_json(SteerResult {
                    item_id,
                    disposition,
                })
            })
        }),
    ),
    vendor(
        "inbox.enqueue",
        "_spindle/session/inbox/enqueue",
        Handler::Vendor(|d, params| d.enqueue(decode(d, params)?)),
    ),
    vendor(
        "inbox.list",
        "_spindle/session/inbox/list",
        Handler::Vendor(|d, params| d.inbox_list(decode(d, params)?)),
    ),
    vendor(
        "inbox.get",
        "_spindle/session/inbox/get",
        Handler::Vendor(|d, params| d.inbox_get(decode(d, params)?)),
    ),
    vendor(
        "inbox.update",
        "_spindle/session/inbox/update",
        Handler::Vendor(|d, params| d.inbox_update(decode(d, params)?)),
    ),
    vendor(
        "inbox.delete",
        "_spindle/session/inbox/delete",
        Handler::Vendor(|d, params| d.inbox_delete(decode(d, params)?)),
    ),
    vendor(
        "inbox.move",
        "_spindle/session/inbox/move",
        Handler::Vendor(|d, params| d.inbox_move(decode(d, params)?)),
    ),
    vendor(
        "inbox.setPaused",
        "_spindle/session/inbox/setPaused",
        Handler::Vendor(|d, params| d.inbox_set_paused(decode(d, params)?)),
    ),
    vendor(
        "inbox.retry",
        "_spindle/session/inbox/retry",
        Handler::Vendor(|d, params| d.inbox_retry(decode(d, params)?)),
    ),
    vendor(
        "inbox.refresh",
        "_spindle/session/inbox/refresh",
        Handler::Vendor(|d, params| d.inbox_refresh(decode(d, params)?)),
    ),
    vendor(
        "steering",
        "_session/steering",
        Handler::Vendor(|d, params| d.steering(decode(d, params)?)),
    ),
    vendor(
        "rewindPoints",
        "_session/rewind_points",
        Handler::Vendor(|d, params| d.rewind_points(decode(d, params)?)),
    ),
    vendor(
        "rewind",
        "_session/rewind",
        Handler::Vendor(|d, params| d.rewind(decode(d, params)?)),
    ),
    vendor(
        "goal.pause",
        "_spindle/session/goal/pause",
        Handler::Vendor(|d, params| d.goal_pause(decode(d, params)?)),
    ),
    vendor(
        "goal.resume",
        "_spindle/session/goal/resume",
        Handler::Vendor(|d, params| d.goal_resume(decode(d, params)?)),
    ),
    vendor(
        "settings",
        "_spindle/settings",
        Handler::Vendor(|d, params| d.settings_catalog(decode(d, params)?)),
    ),
    vendor(
        "setting.set",
        "_spindle/setting/set",
        Handler::Vendor(|d, params| d.setting_set(decode(d, params)?)),
    ),
    vendor(
        "models",
        "_spindle/models",
        Handler::Vendor(|d, params| d.models_catalog(decode(d, params)?)),
    ),
    vendor(
        "operations",
        "_spindle/operations",
        Handler::Vendor(|d, params| d.operations(decode(d, params)?)),
    ),
    vendor(
        "invoke",
        "_spindle/invoke",
        Handler::Vendor(|d, params| d.invoke(decode(d, params)?)),
    ),
    vendor(
        "reload",
        "_spindle/session/reload",
        Handler::Vendor(|d, params| d.reload(decode(d, params)?)),
    ),
    vendor(
        "jobs",
        "_spindle/jobs",
        Handler::Vendor(|d, params| d.jobs_list(decode(d, params)?)),
    ),
    vendor(
        "job",
        "_spindle/job",
        Handler::Vendor(|d, params| d.job_item(decode(d, params)?)),
    ),
    // An agent job's log not indexed yet is read on a thread of its own.
    vendor(
        "job.transcript",
        "_spindle/job/transcript",
        Handler::Later(|d, id, params| match decode(d, &params) {
            Ok(params) => d.job_transcript(id, params),
            Err(error) => Some(Err(error)),
        }),
    ),
    vendor(
        "job.send",
        "_spindle/job/send",
        Handler::Vendor(|d, params| d.job_send(decode(d, params)?)),
    ),
    vendor(
        "job.cancel",
        "_spindle/job/cancel",
        Handler::Vendor(|d, params| d.job_cancel(decode(d, params)?)),
    ),
    // A file not indexed yet is read on a thread of its own.
    vendor(
        "resource",
        "_spindle/resource",
        Handler::Later(|d, id, params| match decode(d, &params) {
            Ok(params) => d.resource(id, params),
            Err(error) => Some(Err(error)),
        }),
    ),
    Route {
        method: TEST_PANIC,
        key: None,
        handler: Handler::Vendor(|d, _| {
            if d.test_hooks() {
                panic!("test hook asked for a panic")
            }
            Err(RpcError::method_not_found(TEST_PANIC))
        }),
    },
];

/// The notifications this build sends, by discovery key.
const NOTIFICATIONS: &[(&str, &str)] = &[("event", "_spindle/event")];

/// The route of a method; `None` when this build does not serve it.
pub(super) fn route(method: &str) -> Option<&'static Route> {
    ROUTES.iter().find(|route| route.method == method)
}

/// `agentCapabilities._meta.spindle`, as discovery lists it: every routed
/// vendor method by its key.
pub(super) fn discovery() -> Value {
    let methods: Map<String, Value> = ROUTES
        .iter()
        .filter_map(|route| Some((route.key?.to_string(), json!(route.method))))
        .collect();
    let notifications: Map<String, Value> = NOTIFICATIONS
        .iter()
        .map(|(key, name)| (key.to_string(), json!(name)))
        .collect();
    json!({"schemaVersion": 1, "methods": methods, "notifications": notifications})
}

/// The answer of `_spindle/capabilities`: discovery and the version.
fn capabilities() -> Value {
    let mut value = discovery();
    value["version"] = json!(env!("CARGO_PKG_VERSION"));
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn discovery_lists_exactly_the_routed_vendor_methods() {
        let names: Vec<&str> = ROUTES.iter().map(|r| r.method).collect();
        let unique: BTreeSet<&str> = names.iter().copied().collect();
        assert_eq!(unique.len(), names.len(), "a method is routed twice");
        let keys: Vec<&str> = ROUTES.iter().filter_map(|r| r.key).collect();
        let unique_keys: BTreeSet<&str> = keys.iter().copied().collect();
        assert_eq!(unique_keys.len(), keys.len(), "a key is used twice");

        let routed: BTreeSet<&str> = ROUTES
            .iter()
            .map(|r| r.method)
            .filter(|m| m.starts_with('_') && *m != TEST_PANIC)
            .collect();
        let discovery = discovery();
        let advertised: BTreeSet<&str> = discovery["methods"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(advertised, routed);
        assert!(advertised.contains("_spindle/resource"));
        assert!(advertised.contains("_session/steering"));
        for (key, name) in discovery["methods"].as_object().unwrap() {
            let route = route(name.as_str().unwrap()).expect("advertised is routed");
            assert_eq!(route.key, Some(key.as_str()));
        }
        // The stable methods and the test hook are not vendor discovery.
        for route in ROUTES.iter().filter(|r| !r.method.starts_with('_')) {
            assert_eq!(route.key, None, "{}", route.method);
        }
        assert_eq!(self::route(TEST_PANIC).unwrap().key, None);
        assert!(self::route("_spindle/nothing").is_none());
        assert_eq!(capabilities()["version"], env!("CARGO_PKG_VERSION"));
    }
}
