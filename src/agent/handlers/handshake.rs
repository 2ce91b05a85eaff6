//! The handshake: `initialize` (what Spindle can do, and the client's
//! capabilities) and `authenticate` (reading the provider setup again).

use crate::acp::{self, Implementation};
use crate::agent::dispatcher::Dispatcher;
use crate::rpc::RpcError;
use crate::util::OrLogged;
use serde_json::{json, Value};

/// The older terminal-auth descriptor: a client runs `command` with
/// `args` in place of the agent's own command line, so it is this
/// process's command line with `--setup` added (the same `--config`,
/// the same agent file).
fn legacy_terminal_auth() -> Value {
    let command = std::env::current_exe()
        .ok()
        .and_then(|path| path.to_str().map(str::to_string))
        .unwrap_or_else(|| "spindle".to_string());
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) != Some("acp") {
        // In process (`exec`, `chat`): the wizard's own command.
        args = vec!["acp".to_string()];
    }
    args.push("--setup".to_string());
    json!({"label": "Set up a model provider", "command": command, "args": args})
}

/// `initialize`; `discovery` is the vendor methods' discovery object
/// (`agentCapabilities._meta.spindle`), which the route table derives.
pub(super) fn initialize(
    d: &mut Dispatcher,
    request: acp::InitializeRequest,
    discovery: Value,
) -> Result<Value, RpcError> {
    if let Some(info) = &request.client_info {
        log::info!(
            "client {} {} asks for protocol version {}",
            info.name,
            info.version,
            request.protocol_version
        );
    }
    // A client that can run our binary in a terminal gets the setup
    // wizard as an auth method (the client appends `args` to the
    // command line it starts us with: `spindle acp … --setup`); every
    // client can ask us to check again.
    let mut auth_methods = vec![json!({
        "id": "spindle-check",
        "name": "Check the model provider setup",
        "description": "Reads the configuration and environment again (after `spindle setup` or setting an API key).",
    })];
    // Either way of announcing it counts (`auth.terminal`, or the older
    // `_meta["terminal-auth"]`); the method carries both forms too: the
    // `terminal` type with `args` to append, and the older
    // `_meta["terminal-auth"]` with the whole command line to run.
    if request.client_capabilities.terminal_auth() {
        auth_methods.push(json!({
            "type": "terminal",
            "id": "spindle-setup",
            "name": "Set up a model provider",
            "description": "Runs `spindle setup` in a terminal: choose a provider, its key and a model.",
            "args": ["--setup"],
            "_meta": {"terminal-auth": legacy_terminal_auth()},
        }));
    }
    d.set_client(request.client_capabilities);
    let response = acp::InitializeResponse {
        protocol_version: acp::PROTOCOL_VERSION,
        agent_capabilities: json!({
            "loadSession": true,
            "promptCapabilities": {
                "image": true,
                "audio": false,
                "embeddedContext": true
            },
            "mcpCapabilities": { "http": true, "sse": true },
            "auth": { "logout": {} },
            // `fork`, `title`, `status` and `systemPrompt` are
            // unstable; the stable schema allows the fields.
            "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "delete": {}, "fork": {}, "additionalDirectories": {}, "title": {}, "status": {},
                // `append`, and `override` too.
                "systemPrompt": {"mode": {"override": {}}}},
            "_meta": { "spindle": discovery }
        }),
        auth_methods,
        // An agent file's agent shows its own name.
        agent_info: match &d.options().agent {
            Some(agent) => Implementation {
                name: agent.name.clone(),
                title: Some(agent.name.clone()),
                version: env!("CARGO_PKG_VERSION").into(),
            },
            None => Implementation {
                name: "spindle".into(),
                title: Some("Spindle".into()),
                version: env!("CARGO_PKG_VERSION").into(),
            },
        },
    };
    let mut value = serde_json::to_value(response).or_logged("cannot write the initialize answer");
    // The cross-agent conventions: `_session/steering`, and
    // `_session/rewind_points` with `_session/rewind`.
    value["_meta"] = json!({"steering": {"supported": true}, "rewind": {"supported": true}});
    Ok(value)
}

pub(super) fn authenticate(d: &mut Dispatcher, params: Value) -> Result<Value, RpcError> {
    let method_id = params
        .get("methodId")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("missing field `methodId`"))?;
    if method_id != "spindle-check" && method_id != "spindle-setup" {
        return Err(RpcError::invalid_params(format!(
            "unknown auth method {method_id:?}; the methods are spindle-check and spindle-setup"
        )));
    }
    // Read the configuration and the environment again.
    d.take_warm();
    d.forget_registry();
    d.registry().map(|_| json!({}))
}

/// `logout`: forgets the keys Spindle keeps itself (given to `spindle
/// setup --key-stdin`), never an environment variable or a key file the
/// user named; the providers are read again, so the next prompt asks
/// to authenticate when no key is left.
pub(super) fn logout(d: &mut Dispatcher, _params: Value) -> Result<Value, RpcError> {
    d.take_warm();
    let path = d
        .options()
        .config
        .clone()
        .unwrap_or_else(crate::config::default_path);
    let forgotten = match crate::config::read_text(&path) {
        Ok(Some(text)) => match crate::config::Config::parse(&text, &path) {
            Ok(config) => crate::config::forget_managed_keys(&config, &path),
            Err(error) => {
                return Err(RpcError::failed(format!(
                    "Cannot log out: the config cannot be read: {error}"
                ))
                .with_data(json!({"code": "config_invalid"})))
            }
        },
        Ok(None) | Err(_) => Vec::new(),
    };
    log::info!("logout: forgot the keys of {forgotten:?}");
    d.forget_registry();
    Ok(json!({"_meta": {"spindle": {"forgotten": forgotten}}}))
}
