//! The params of the vendor methods, decoded once by the router into each
//! method's type (`acp::spindle`), and the errors the handlers answer
//! with (`data.code` names the class, docs/extensions.md, "Conventions").

use crate::acp::spindle::{FromParams, SessionCheck};
use crate::agent::dispatcher::Dispatcher;
use crate::rpc::RpcError;
use serde_json::{json, Value};

pub(super) use crate::acp::spindle::bad;

pub(super) fn store_error(error: crate::store::StoreError) -> RpcError {
    RpcError::internal(error.to_string()).with_data(json!({"code": "store_unavailable"}))
}

/// A vendor method's params as its type: the session is read and found
/// open first (-32602 `unknown_session` when it is not), then every
/// other field is read and checked (-32602 `invalid_params` naming it).
pub(super) fn decode<'a, T: FromParams<'a>>(
    dispatcher: &Dispatcher,
    params: &'a Value,
) -> Result<T, RpcError> {
    let session_id = check_session(dispatcher, T::SESSION, params)?;
    T::read(session_id, params)
}

fn check_session<'a>(
    d: &Dispatcher,
    check: SessionCheck,
    params: &'a Value,
) -> Result<&'a str, RpcError> {
    let id = check.session_id(params)?;
    match d.session(id) {
        Some(session) if !session.is_closed() => Ok(id),
        _ => Err(check.not_open(id)),
    }
}
