//! Turns the `mcpServers` entries of an ACP session request into server
//! configurations.
//!
//! ACP v1 sends stdio servers as `{name, command, args, env: [{name,
//! value}]}` (no `type`), HTTP servers as `{type: "http", name, url,
//! headers: [{name, value}]}` and legacy SSE servers the same way with
//! `type: "sse"`. Older clients send `env` and `headers` as plain objects,
//! which are accepted too. An entry that cannot be understood is not a
//! protocol error: it is reported to the user as a failed server.
//!
//! Environment values and header values are secrets (API keys, bearer
//! tokens), so the `Debug` output of a configuration shows their names only.

use super::elicit::ElicitationSupport;
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::fmt;

/// One MCP server to connect to.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ServerConfig {
    /// The name from the configuration; it prefixes the exposed tool names.
    pub name: String,
    pub transport: TransportConfig,
    /// Variables removed from a stdio server's inherited environment (the
    /// provider credentials); its own configured `env` is set after, so it
    /// still wins.
    pub env_remove: Vec<String>,
    /// The most bytes of one message from the server (config
    /// `limits.mcp_message_bytes`); `None` for the default.
    pub message_cap: Option<usize>,
    /// The elicitation modes the editor takes (none by default): declared
    /// to the server, whose questions during a tool call are forwarded.
    pub elicitation: ElicitationSupport,
    /// The folder of the sign-in tokens of HTTP servers (`None`: no
    /// sign-in, as in tests and for servers of no user).
    pub tokens: Option<std::path::PathBuf>,
    /// What HTTPS to the server trusts: the config's (none added by
    /// default).
    pub trust: crate::net::Trust,
}

/// How to reach a server.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum TransportConfig {
    /// A child process speaking newline-delimited JSON-RPC on stdio.
    Stdio {
        command: String,
        args: Vec<String>,
        /// Variables added to the inherited environment (never replacing
        /// it, so `PATH` survives unless the entry sets it).
        env: Vec<(String, String)>,
    },
    /// Streamable HTTP (falling back to the legacy transport when the
    /// server rejects the POST of `initialize` with 400, 404 or 405).
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
    /// The legacy HTTP+SSE transport of revision 2024-11-05.
    Sse {
        url: String,
        headers: Vec<(String, String)>,
    },
}

impl ServerConfig {
    /// The values that must never appear in logs: environment values of a
    /// stdio server, header values of an HTTP one.
    #[cfg(test)]
    pub(crate) fn secrets(&self) -> Vec<String> {
        let pairs = match &self.transport {
            TransportConfig::Stdio { env, .. } => env,
            TransportConfig::Http { headers, .. } | TransportConfig::Sse { headers, .. } => headers,
        };
        pairs.iter().map(|(_, value)| value.clone()).collect()
    }
}

impl fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerConfig")
            .field("name", &self.name)
            .field("transport", &self.transport)
            .finish()
    }
}

impl fmt::Debug for TransportConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = |pairs: &[(String, String)]| -> Vec<String> {
            pairs.iter().map(|(name, _)| name.clone()).collect()
        };
        match self {
            TransportConfig::Stdio { command, args, env } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", &args.len())
                .field("env", &names(env))
                .finish(),
            TransportConfig::Http { url, headers } => f
                .debug_struct("Http")
                .field("url", url)
                .field("headers", &names(headers))
                .finish(),
            TransportConfig::Sse { url, headers } => f
                .debug_struct("Sse")
                .field("url", url)
                .field("headers", &names(headers))
                .finish(),
        }
    }
}

/// What a name written in a config file or given to `spindle mcp add`
/// must be, said to the user. Editors' names are not held to it (their
/// tools' names are cleaned instead, see `exposed_name`).
pub(crate) const NAME_RULE: &str = "an MCP server's name is 1 to 64 letters, digits, '-', '_' and '.', does not start with '-' and holds no '__' (its tools are named mcp__NAME__TOOL)";

/// Whether `name` follows [`NAME_RULE`]: the tools a server gives are
/// named `mcp__NAME__TOOL` in permission rules and hook matchers, where a
/// `__` inside the name would let one server's rules match another's; a
/// leading `-` reads as an option on the command line; anything beyond
/// plain ASCII letters may hide or reorder what a terminal shows.
pub(crate) fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && !name.starts_with('-')
        && !name.contains("__")
}

/// A name as an error quotes it: its first 40 characters, written out
/// (the name may hold anything).
pub(crate) fn quoted_name(name: &str) -> String {
    let mut short: String = name.chars().take(40).collect();
    if short.len() < name.len() {
        short.push('…');
    }
    format!("\"{}\"", crate::util::visible(&short, false))
}

/// Parses the `mcpServers` entries. Returns the valid configurations and,
/// for every entry that could not be understood, its name (or `server #N`
/// when it has none) and the reason. A repeated name is refused, because
/// the name is what keeps the tools of two servers apart.
pub(crate) fn parse_servers(values: &[Value]) -> (Vec<ServerConfig>, Vec<(String, String)>) {
    let mut configs = Vec::new();
    let mut failures = Vec::new();
    let mut names = HashSet::new();
    for (index, value) in values.iter().enumerate() {
        let label = value
            .get("name")
            .and_then(Value::as_str)
            .filter(|name| !name.trim().is_empty())
            .map_or_else(|| format!("server #{}", index + 1), str::to_string);
        match parse_one(value) {
            Ok(config) if !names.insert(config.name.clone()) => failures.push((
                label,
                "another MCP server has the same name; names must be unique".to_string(),
            )),
            Ok(config) => configs.push(config),
            Err(reason) => failures.push((label, reason)),
        }
    }
    (configs, failures)
}

fn parse_one(value: &Value) -> Result<ServerConfig, String> {
    let object = value
        .as_object()
        .ok_or("the MCP server entry is not a JSON object")?;
    let name = object
        .get("name")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .ok_or("the MCP server entry has no `name`")?
        .to_string();
    let kind = match object.get("type") {
        None | Some(Value::Null) => "stdio",
        Some(Value::String(kind)) => kind.as_str(),
        Some(_) => return Err("`type` is not a string".to_string()),
    };
    let transport = match kind {
        "stdio" => {
            let command = object
                .get("command")
                .and_then(Value::as_str)
                .filter(|command| !command.trim().is_empty())
                .ok_or("a stdio MCP server needs a `command`")?
                .to_string();
            let args = match object.get("args") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|item| item.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .ok_or("`args` must be an array of strings")?,
                Some(_) => return Err("`args` must be an array of strings".to_string()),
            };
            let env = pairs(object, "env")?;
            if let Some((bad, _)) = env
                .iter()
                .find(|(key, _)| key.is_empty() || key.contains(['=', '\0']))
            {
                return Err(format!("`{bad}` is not a valid environment variable name"));
            }
            TransportConfig::Stdio { command, args, env }
        }
        "http" | "sse" => {
            let url = object
                .get("url")
                .and_then(Value::as_str)
                .map(str::trim)
                .ok_or_else(|| format!("an {kind} MCP server needs a `url`"))?
                .to_string();
            let lower = url.to_ascii_lowercase();
            if !(lower.starts_with("http://") || lower.starts_with("https://")) {
                return Err(format!("`{url}` is not an http:// or https:// URL"));
            }
            let headers = pairs(object, "headers")?;
            if let Some((bad, _)) = headers.iter().find(|(key, value)| {
                key.is_empty()
                    || !key.bytes().all(|b| b.is_ascii_graphic() && b != b':')
                    || value.contains(['\r', '\n'])
            }) {
                return Err(format!("the header `{bad}` is not valid"));
            }
            if kind == "http" {
                TransportConfig::Http { url, headers }
            } else {
                TransportConfig::Sse { url, headers }
            }
        }
        other => return Err(format!("MCP servers of type `{other}` are not supported")),
    };
    Ok(ServerConfig {
        name,
        transport,
        env_remove: Vec::new(),
        message_cap: None,
        elicitation: ElicitationSupport::default(),
        tokens: None,
        trust: crate::net::Trust::default(),
    })
}

/// Reads `env` or `headers` in either shape: an array of `{name, value}`
/// objects (ACP v1) or an object map (older clients). Missing means empty.
/// Numbers and booleans are accepted as values and turned into text.
fn pairs(object: &Map<String, Value>, field: &str) -> Result<Vec<(String, String)>, String> {
    let text = |value: &Value| -> Option<String> {
        match value {
            Value::String(text) => Some(text.clone()),
            Value::Number(number) => Some(number.to_string()),
            Value::Bool(flag) => Some(flag.to_string()),
            _ => None,
        }
    };
    match object.get(field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                let key = item.get("name").and_then(Value::as_str);
                let value = item.get("value").and_then(text);
                match (key, value) {
                    (Some(key), Some(value)) => Ok((key.to_string(), value)),
                    _ => Err(format!(
                        "each `{field}` entry must be an object with a string `name` and `value`"
                    )),
                }
            })
            .collect(),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(key, value)| {
                text(value)
                    .map(|value| (key.clone(), value))
                    .ok_or_else(|| format!("the `{field}` value of `{key}` is not a string"))
            })
            .collect(),
        Some(_) => Err(format!(
            "`{field}` must be an array of {{name, value}} objects"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_the_acp_shapes() {
        let values = vec![
            json!({"name": "fs", "command": "/bin/fs", "args": ["--stdio"],
                   "env": [{"name": "API_KEY", "value": "k1"}]}),
            json!({"type": "stdio", "name": "old", "command": "fs", "env": {"TOKEN": "k2", "N": 3}}),
            json!({"type": "http", "name": "api", "url": "https://example.com/mcp",
                   "headers": [{"name": "Authorization", "value": "Bearer t"}]}),
            json!({"type": "sse", "name": "legacy", "url": "http://localhost:1/sse",
                   "headers": {"X-Key": "v"}}),
        ];
        let (configs, failures) = parse_servers(&values);
        assert!(failures.is_empty(), "{failures:?}");
        assert_eq!(configs.len(), 4);
        assert_eq!(
            configs[0].transport,
            TransportConfig::Stdio {
                command: "/bin/fs".into(),
                args: vec!["--stdio".into()],
                env: vec![("API_KEY".into(), "k1".into())],
            }
        );
        // The order of an object map depends on serde_json's features.
        let TransportConfig::Stdio { mut env, .. } = configs[1].transport.clone() else {
            panic!("{:?}", configs[1]);
        };
        env.sort();
        assert_eq!(
            env,
            vec![("N".into(), "3".into()), ("TOKEN".into(), "k2".into())]
        );
        assert_eq!(
            configs[2].transport,
            TransportConfig::Http {
                url: "https://example.com/mcp".into(),
                headers: vec![("Authorization".into(), "Bearer t".into())],
            }
        );
        assert_eq!(
            configs[3].transport,
            TransportConfig::Sse {
                url: "http://localhost:1/sse".into(),
                headers: vec![("X-Key".into(), "v".into())],
            }
        );
        assert_eq!(configs[2].secrets(), vec!["Bearer t".to_string()]);
    }

    #[test]
    fn reports_entries_it_cannot_understand() {
        let values = vec![
            json!("not an object"),
            json!({"command": "/bin/x"}),
            json!({"name": "a", "args": []}),
            json!({"name": "b", "type": "acp", "serverId": "x"}),
            json!({"name": "c", "type": "http"}),
            json!({"name": "d", "type": "http", "url": "ftp://x"}),
            json!({"name": "e", "command": "x", "env": [{"name": "K"}]}),
            json!({"name": "f", "command": "x", "args": [1]}),
            json!({"name": "g", "command": "x"}),
            json!({"name": "g", "command": "y"}),
            json!({"name": "h", "type": "http", "url": "http://x", "headers": [{"name": "A", "value": "x\r\ny"}]}),
        ];
        let (configs, failures) = parse_servers(&values);
        assert_eq!(configs.len(), 1, "{configs:?}");
        assert_eq!(configs[0].name, "g");
        let names: Vec<&str> = failures.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(
            names,
            [
                "server #1",
                "server #2",
                "a",
                "b",
                "c",
                "d",
                "e",
                "f",
                "g",
                "h"
            ]
        );
        assert!(failures[3].1.contains("`acp`"), "{failures:?}");
    }

    #[test]
    fn names_follow_the_rule() {
        for good in ["github", "my-server", "fs_2", "a", "v1.2", &"x".repeat(64)] {
            assert!(valid_name(good), "{good}");
        }
        for bad in [
            "",
            &"x".repeat(65),
            &"x".repeat(5000),
            "a__b",
            "__",
            "--",
            "-x",
            "a b",
            "a/b",
            "tab\there",
            "esc\u{1b}[2J",
            "c1\u{9b}",
            "bidi\u{202e}",
            "zwsp\u{200b}",
            "é",
        ] {
            assert!(!valid_name(bad), "{bad:?}");
        }
        assert_eq!(quoted_name("a\u{1b}b"), "\"a\\u{1b}b\"");
        assert_eq!(
            quoted_name(&"x".repeat(5000)),
            format!("\"{}…\"", "x".repeat(40))
        );
    }

    #[test]
    fn debug_shows_names_but_never_values() {
        let values = vec![
            json!({"name": "fs", "command": "/bin/fs", "args": ["--token", "argsecret"],
                   "env": [{"name": "API_KEY", "value": "envsecret"}]}),
            json!({"type": "http", "name": "api", "url": "https://example.com/mcp",
                   "headers": [{"name": "Authorization", "value": "Bearer hdrsecret"}]}),
        ];
        let (configs, _) = parse_servers(&values);
        let shown = format!("{configs:?} {configs:#?}");
        assert!(shown.contains("API_KEY") && shown.contains("Authorization"));
        for secret in ["envsecret", "hdrsecret", "argsecret"] {
            assert!(!shown.contains(secret), "{shown}");
        }
    }
}
