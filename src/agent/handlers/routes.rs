//! The one typed table from method name to handler, for the stable ACP
//! methods and the vendor ones alike ([`ROUTES`]), and the discovery
//! object derived from it (`agentCapabilities._meta.spindle`,
//! `_spindle/capabilities`): a vendor method is advertised exactly when
//! it is served.
//!
//! Each route is declared once with [`route!`]: its method name, its
//! discovery key (vendor methods only), its handler, its params type and
//! its result type. The handlers are plain functions
//! `fn(&mut Dispatcher, Params) -> Result<Result, RpcError>`; their params
//! are decoded in one place ([`stable`] for the stable methods through
//! [`StableParams`], [`vendor`] through `ext_params::decode`) and their
//! results encoded in one place ([`Reply`]). A `later` route's handler
//! answers now (`Some`) or leaves the answer to a turn or a helper thread
//! (`None`).

use super::ext_params::{self, bad};
use super::{
    catalogs, controls, goals, handshake, inbox, jobs, lifecycle, prompting, resources, rewind,
    status, titles,
};
use crate::acp::spindle::results::{to_json, SteerResult};
use crate::acp::spindle::{self as ext, FromParams};
use crate::acp::{self, method};
use crate::agent::dispatcher::params;
use crate::agent::dispatcher::Dispatcher;
use crate::rpc::{RequestId, RpcError};
use serde_json::{json, Map, Value};

/// How a method is answered, as the table stores it (one function pointer
/// per route, made by [`route!`]).
pub(super) enum Handler {
    /// Now, from the params as sent.
    Now(fn(&mut Dispatcher, Value) -> Result<Value, RpcError>),
    /// Now, or later by a turn or a helper thread (`None`: the answer
    /// comes later, for the request's id).
    Later(fn(&mut Dispatcher, &RequestId, Value) -> Option<Result<Value, RpcError>>),
}

/// One method: its name, its discovery key (vendor methods; `None` for
/// the stable ones and the test hook) and its handler.
pub(super) struct Route {
    pub(super) method: &'static str,
    pub(super) key: Option<&'static str>,
    pub(super) handler: Handler,
}

/// The params of a stable method as its handler takes them: the raw
/// params, or a request type decoded with `dispatcher::params::decode`
/// (-32602 naming the field).
pub(super) trait StableParams: Sized {
    fn from_value(params: Value) -> Result<Self, RpcError>;
}

impl StableParams for Value {
    fn from_value(params: Value) -> Result<Self, RpcError> {
        Ok(params)
    }
}

macro_rules! decoded_params {
    ($($params:ty),* $(,)?) => {$(
        impl StableParams for $params {
            fn from_value(params: Value) -> Result<Self, RpcError> {
                params::decode(params)
            }
        }
    )*};
}

decoded_params!(
    acp::InitializeRequest,
    acp::SessionIdRequest,
    acp::SetSessionTitleRequest,
    acp::ListSessionsRequest,
    controls::SetConfigOption,
    controls::SetMode,
);

/// A handler's result as the JSON answer: a `Value` as it is, a result
/// type serialized (`to_json`).
pub(super) trait Reply {
    fn into_json(self) -> Value;
}

impl Reply for Value {
    fn into_json(self) -> Value {
        self
    }
}

impl Reply for SteerResult {
    fn into_json(self) -> Value {
        to_json(self)
    }
}

/// A stable method answered now: the one place its params are decoded
/// and its result encoded.
fn stable<P: StableParams, R: Reply>(
    d: &mut Dispatcher,
    params: Value,
    handler: fn(&mut Dispatcher, P) -> Result<R, RpcError>,
) -> Result<Value, RpcError> {
    handler(d, P::from_value(params)?).map(Reply::into_json)
}

/// A vendor method's params as an object: missing params read as `{}`,
/// params that are not an object are refused before any decoding.
fn vendor_object(params: Value) -> Result<Value, RpcError> {
    match params {
        Value::Null => Ok(json!({})),
        params if params.is_object() => Ok(params),
        _ => Err(bad("params", "must be an object")),
    }
}

/// A vendor method answered now: the one place its params are decoded
/// (the session checked open first) and its result encoded.
fn vendor<'a, P: FromParams<'a>, R: Reply>(
    d: &mut Dispatcher,
    params: &'a Value,
    handler: fn(&mut Dispatcher, P) -> Result<R, RpcError>,
) -> Result<Value, RpcError> {
    let params = ext_params::decode(d, params)?;
    handler(d, params).map(Reply::into_json)
}

/// A vendor method a helper thread may answer later.
fn vendor_later<'a, P: FromParams<'a>>(
    d: &mut Dispatcher,
    id: &RequestId,
    params: &'a Value,
    handler: fn(&mut Dispatcher, &RequestId, P) -> Option<Result<Value, RpcError>>,
) -> Option<Result<Value, RpcError>> {
    match ext_params::decode(d, params) {
        Ok(params) => handler(d, id, params),
        Err(error) => Some(Err(error)),
    }
}

/// A stable method a turn answers later; an `Err` is answered now.
fn stable_later<P: StableParams>(
    d: &mut Dispatcher,
    id: &RequestId,
    params: Value,
    handler: fn(&mut Dispatcher, &RequestId, P) -> Result<(), RpcError>,
) -> Option<Result<Value, RpcError>> {
    match P::from_value(params) {
        Ok(params) => handler(d, id, params).err().map(Err),
        Err(error) => Some(Err(error)),
    }
}

/// One entry of [`ROUTES`], declared once: `stable` or `vendor "key"`,
/// `later` when a turn or a helper may answer, then the method, the
/// handler and `Params => Result`.
macro_rules! route {
    (stable $method:expr, $handler:expr, $params:ty => $result:ty) => {
        Route {
            method: $method,
            key: None,
            handler: Handler::Now(|d, params| stable::<$params, $result>(d, params, $handler)),
        }
    };
    (stable later $method:expr, $handler:expr, $params:ty => ()) => {
        Route {
            method: $method,
            key: None,
            handler: Handler::Later(|d, id, params| {
                stable_later::<$params>(d, id, params, $handler)
            }),
        }
    };
    (vendor $key:literal, $method:literal, $handler:expr, () => $result:ty) => {
        Route {
            method: $method,
            key: Some($key),
            handler: Handler::Now(|d, params| {
                vendor_object(params)?;
                let handler: fn(&mut Dispatcher) -> Result<$result, RpcError> = $handler;
                handler(d).map(Reply::into_json)
            }),
        }
    };
    (vendor $key:literal, $method:literal, $handler:expr, $params:ty => $result:ty) => {
        Route {
            method: $method,
            key: Some($key),
            handler: Handler::Now(|d, params| {
                let params = vendor_object(params)?;
                vendor::<$params, $result>(d, &params, $handler)
            }),
        }
    };
    (vendor later $key:literal, $method:literal, $handler:expr, $params:ty => Value) => {
        Route {
            method: $method,
            key: Some($key),
            // As sent: the session check refuses params that are not an
            // object.
            handler: Handler::Later(|d, id, params| {
                vendor_later::<$params>(d, id, &params, $handler)
            }),
        }
    };
}

/// The method that panics the dispatcher, for the crash tests; served
/// only with test hooks on, never advertised.
pub(super) const TEST_PANIC: &str = "_spindle/test/panic";

/// Every method this build serves.
pub(super) const ROUTES: &[Route] = &[
    route!(
        stable method::INITIALIZE,
        |d, request| handshake::initialize(d, request, discovery()),
        acp::InitializeRequest => Value
    ),
    route!(stable method::AUTHENTICATE, handshake::authenticate, Value => Value),
    route!(stable method::LOGOUT, handshake::logout, Value => Value),
    route!(stable method::SESSION_SET_MODE, controls::set_mode, controls::SetMode => Value),
    route!(
        stable method::SESSION_SET_CONFIG_OPTION,
        controls::set_config_option,
        controls::SetConfigOption => Value
    ),
    route!(stable method::SESSION_NEW, lifecycle::new_session, Value => Value),
    route!(stable method::SESSION_LOAD, lifecycle::load, Value => Value),
    route!(stable method::SESSION_RESUME, lifecycle::resume, Value => Value),
    route!(
        stable method::SESSION_LIST,
        lifecycle::list_sessions,
        acp::ListSessionsRequest => Value
    ),
    route!(
        stable method::SESSION_CLOSE,
        lifecycle::close_session,
        acp::SessionIdRequest => Value
    ),
    route!(stable method::SESSION_FORK, lifecycle::fork_session, Value => Value),
    route!(stable method::SESSION_SET_MODEL, controls::set_model, Value => Value),
    route!(
        stable method::SESSION_DELETE,
        lifecycle::delete_session,
        acp::SessionIdRequest => Value
    ),
    // Unstable ACP (`sessionCapabilities.title`, `.status`).
    route!(
        stable method::SESSION_SET_TITLE,
        titles::set_title,
        acp::SetSessionTitleRequest => Value
    ),
    route!(
        stable method::SESSION_STATUS,
        titles::session_status,
        acp::SessionIdRequest => Value
    ),
    // A turn answers.
    route!(stable later method::SESSION_PROMPT, prompting::prompt, Value => ()),
    route!(vendor "capabilities", "_spindle/capabilities", |_| Ok(capabilities()), () => Value),
    route!(
        vendor "status", "_spindle/session/status",
        status::status,
        ext::StatusParams<'_> => Value
    ),
    route!(
        vendor "steer", "_spindle/session/steer",
        inbox::steer,
        ext::SteerParams<'_> => SteerResult
    ),
    route!(
        vendor "inbox.enqueue", "_spindle/session/inbox/enqueue",
        inbox::enqueue,
        ext::EnqueueParams<'_> => Value
    ),
    route!(
        vendor "inbox.list", "_spindle/session/inbox/list",
        inbox::inbox_list,
        ext::InboxListParams<'_> => Value
    ),
    route!(
        vendor "inbox.get", "_spindle/session/inbox/get",
        inbox::inbox_get,
        ext::ItemParams<'_> => Value
    ),
    route!(
        vendor "inbox.update", "_spindle/session/inbox/update",
        inbox::inbox_update,
        ext::InboxUpdateParams<'_> => Value
    ),
    route!(
        vendor "inbox.delete", "_spindle/session/inbox/delete",
        inbox::inbox_delete,
        ext::ItemParams<'_> => Value
    ),
    route!(
        vendor "inbox.move", "_spindle/session/inbox/move",
        inbox::inbox_move,
        ext::InboxMoveParams<'_> => Value
    ),
    route!(
        vendor "inbox.setPaused", "_spindle/session/inbox/setPaused",
        inbox::inbox_set_paused,
        ext::InboxSetPausedParams<'_> => Value
    ),
    route!(
        vendor "inbox.retry", "_spindle/session/inbox/retry",
        inbox::inbox_retry,
        ext::ItemParams<'_> => Value
    ),
    route!(
        vendor "inbox.refresh", "_spindle/session/inbox/refresh",
        inbox::inbox_refresh,
        ext::ItemParams<'_> => Value
    ),
    route!(
        vendor "steering", "_session/steering",
        inbox::steering,
        ext::SteeringParams<'_> => Value
    ),
    route!(
        vendor "rewindPoints", "_session/rewind_points",
        rewind::rewind_points,
        ext::rewind::RewindPointsParams<'_> => Value
    ),
    route!(
        vendor "rewind", "_session/rewind",
        rewind::rewind,
        ext::rewind::RewindParams<'_> => Value
    ),
    route!(
        vendor "goal.pause", "_spindle/session/goal/pause",
        goals::goal_pause,
        ext::GoalPauseParams<'_> => Value
    ),
    route!(
        vendor "goal.resume", "_spindle/session/goal/resume",
        goals::goal_resume,
        ext::GoalResumeParams<'_> => Value
    ),
    route!(
        vendor "settings", "_spindle/settings",
        catalogs::settings_catalog,
        ext::SettingsParams<'_> => Value
    ),
    route!(
        vendor "setting.set", "_spindle/setting/set",
        catalogs::setting_set,
        ext::SettingSetParams<'_> => Value
    ),
    route!(
        vendor "models", "_spindle/models",
        catalogs::models_catalog,
        ext::ModelsParams<'_> => Value
    ),
    route!(
        vendor "operations", "_spindle/operations",
        catalogs::operations,
        ext::OperationsParams<'_> => Value
    ),
    route!(vendor "invoke", "_spindle/invoke", catalogs::invoke, ext::InvokeParams<'_> => Value),
    route!(
        vendor "reload", "_spindle/session/reload",
        catalogs::reload,
        ext::ReloadParams<'_> => Value
    ),
    route!(vendor "jobs", "_spindle/jobs", jobs::jobs_list, ext::JobsParams<'_> => Value),
    route!(vendor "job", "_spindle/job", jobs::job_item, ext::JobParams<'_> => Value),
    // An agent job's log not indexed yet is read on a thread of its own.
    route!(
        vendor later "job.transcript", "_spindle/job/transcript",
        jobs::job_transcript,
        ext::JobTranscriptParams<'_> => Value
    ),
    route!(
        vendor "job.send", "_spindle/job/send",
        jobs::job_send,
        ext::JobSendParams<'_> => Value
    ),
    route!(
        vendor "job.cancel", "_spindle/job/cancel",
        jobs::job_cancel,
        ext::JobParams<'_> => Value
    ),
    // A file not indexed yet is read on a thread of its own.
    route!(
        vendor later "resource", "_spindle/resource",
        resources::resource,
        ext::ResourceParams<'_> => Value
    ),
    Route {
        method: TEST_PANIC,
        key: None,
        handler: Handler::Now(|d, params| {
            vendor_object(params)?;
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
