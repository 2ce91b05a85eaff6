//! W3C Trace Context: the `traceparent` (and `tracestate`) an editor sends
//! with a prompt goes with every model request of that turn, so a tracing
//! backend can join the model server's spans to the editor's.
//!
//! Both values come from outside and become HTTP header values, so they
//! are checked strictly against the format (version `00` only) and
//! anything else is dropped: a value that passes holds nothing but the
//! characters its grammar allows, never a CR or LF.

use std::collections::HashSet;

/// The longest `tracestate` passed on, in bytes (the length W3C asks
/// every vendor to propagate at least).
pub(crate) const TRACESTATE_CAP: usize = 512;
/// The most list members of a `tracestate`.
const TRACESTATE_MEMBERS: usize = 32;

/// A checked trace context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    traceparent: String,
    tracestate: Option<String>,
}

impl TraceContext {
    /// Checks `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`, lowercase,
    /// neither id all zeros) and `tracestate` (at most 32 `key=value`
    /// members in printable ASCII, 512 bytes in all). A bad `traceparent`
    /// is `Err` with the reason; a bad `tracestate` is left out (the
    /// reason logged), as W3C lets a receiver do.
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Result<TraceContext, String> {
        check_traceparent(traceparent)?;
        let tracestate = tracestate.and_then(|state| match check_tracestate(state) {
            Ok(()) if state.trim().is_empty() => None,
            Ok(()) => Some(state.to_string()),
            Err(why) => {
                log::debug!("the tracestate is left out: {why}");
                None
            }
        });
        Ok(TraceContext {
            traceparent: traceparent.to_string(),
            tracestate,
        })
    }

    /// The trace id (32 hex digits).
    pub fn trace_id(&self) -> &str {
        &self.traceparent[3..35]
    }

    pub fn traceparent(&self) -> &str {
        &self.traceparent
    }

    pub fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_deref()
    }

    /// The headers for a model request.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = vec![("traceparent", self.traceparent.clone())];
        if let Some(state) = &self.tracestate {
            headers.push(("tracestate", state.clone()));
        }
        headers
    }
}

/// Adds the trace context's headers, when there is one.
pub(crate) fn add_headers(headers: &mut Vec<(&'static str, String)>, trace: Option<&TraceContext>) {
    if let Some(trace) = trace {
        headers.extend(trace.headers());
    }
}

fn is_lower_hex(text: &str) -> bool {
    text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn check_traceparent(value: &str) -> Result<(), String> {
    let parts: Vec<&str> = value.split('-').collect();
    let [version, trace_id, parent_id, flags] = parts.as_slice() else {
        return Err("a traceparent has four parts joined by `-`".into());
    };
    if *version != "00" {
        return Err("only traceparent version 00 is understood".into());
    }
    let sized = [
        (trace_id, 32, "trace id"),
        (parent_id, 16, "parent id"),
        (flags, 2, "flags"),
    ];
    for (part, length, name) in sized {
        if part.len() != length || !is_lower_hex(part) {
            return Err(format!("the {name} must be {length} lowercase hex digits"));
        }
    }
    if trace_id.bytes().all(|b| b == b'0') {
        return Err("the trace id is all zeros".into());
    }
    if parent_id.bytes().all(|b| b == b'0') {
        return Err("the parent id is all zeros".into());
    }
    Ok(())
}

fn check_tracestate(value: &str) -> Result<(), String> {
    if value.len() > TRACESTATE_CAP {
        return Err(format!("longer than {TRACESTATE_CAP} bytes"));
    }
    if !value
        .bytes()
        .all(|b| (0x20..=0x7e).contains(&b) || b == b'\t')
    {
        return Err("not printable ASCII".into());
    }
    let mut keys = HashSet::new();
    let members: Vec<&str> = value
        .split(',')
        .map(|member| member.trim_matches([' ', '\t']))
        .filter(|member| !member.is_empty())
        .collect();
    if members.len() > TRACESTATE_MEMBERS {
        return Err(format!("more than {TRACESTATE_MEMBERS} members"));
    }
    for member in members {
        let Some((key, state)) = member.split_once('=') else {
            return Err("a member is not `key=value`".into());
        };
        check_key(key)?;
        let value_ok = !state.is_empty()
            && state.len() <= 256
            && state
                .bytes()
                .all(|b| (0x20..=0x7e).contains(&b) && b != b',' && b != b'=')
            && !state.ends_with(' ');
        if !value_ok {
            return Err(format!("the value of `{key}` is not valid"));
        }
        if !keys.insert(key) {
            return Err(format!("the key `{key}` comes twice"));
        }
    }
    Ok(())
}

/// A `tracestate` key: `simple-key` or `tenant@system`.
fn check_key(key: &str) -> Result<(), String> {
    let allowed = |b: u8| {
        b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-' | b'*' | b'/')
    };
    let valid = match key.split_once('@') {
        None => {
            key.len() <= 256
                && key.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
                && key.bytes().all(allowed)
        }
        Some((tenant, system)) => {
            !tenant.is_empty()
                && tenant.len() <= 241
                && tenant
                    .bytes()
                    .next()
                    .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                && tenant.bytes().all(allowed)
                && !system.is_empty()
                && system.len() <= 14
                && system
                    .bytes()
                    .next()
                    .is_some_and(|b| b.is_ascii_lowercase())
                && system.bytes().all(allowed)
        }
    };
    if valid {
        Ok(())
    } else {
        Err("a key is not valid".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_and_tracestate_pass_as_they_are() {
        let trace =
            TraceContext::parse(GOOD, Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")).unwrap();
        assert_eq!(trace.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(
            trace.headers(),
            vec![
                ("traceparent", GOOD.to_string()),
                (
                    "tracestate",
                    "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE".to_string()
                ),
            ]
        );
        let tenant = TraceContext::parse(GOOD, Some("fw529a3039@dt=FFFF")).unwrap();
        assert_eq!(tenant.tracestate(), Some("fw529a3039@dt=FFFF"));
        assert_eq!(TraceContext::parse(GOOD, None).unwrap().headers().len(), 1);
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in [
            "",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\nX-Injected: 1",
            " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
        ] {
            assert!(TraceContext::parse(bad, None).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_bad_tracestate_is_left_out() {
        for bad in [
            "a=b\r\nx-injected: 1",
            "a=b\n",
            "Upper=1",
            "a=b,a=c",
            "novalue",
            "a=é",
            "a=b=c",
            &format!("a={}", "x".repeat(TRACESTATE_CAP)),
            &(0..33)
                .map(|i| format!("k{i}=v"))
                .collect::<Vec<_>>()
                .join(","),
        ] {
            let trace = TraceContext::parse(GOOD, Some(bad)).unwrap();
            assert_eq!(trace.tracestate(), None, "{bad:?}");
            assert_eq!(trace.headers(), vec![("traceparent", GOOD.to_string())]);
        }
    }
}
