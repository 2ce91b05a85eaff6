//! Slash commands in a prompt: what `/name` does (a custom command or
//! `/init` for the model, `/compact`, or an answer Spindle gives itself),
//! and the answers of the local ones.

use crate::agent::common::commands::{self, Builtin, Kind};
use crate::agent::common::models::Registry;
use crate::agent::common::spend::{currency, Spend};
use crate::agent::dispatcher::params::internal;
use crate::agent::dispatcher::Dispatcher;
use crate::agent::handlers::controls;
use crate::agent::handlers::reload;
use crate::agent::turn::report::Rewind;
use crate::agent::turn::TurnKind;
use crate::rpc::RpcError;

/// The answer of a local command (`/help`, `/cost`, `/model`, `/mode`).
pub(in crate::agent::handlers) fn local_reply(
    d: &mut Dispatcher,
    session_id: &str,
    text: &str,
    registry: &Registry,
) -> Result<String, RpcError> {
    match resolve_command(d, session_id, text, registry)? {
        (TurnKind::Local(reply), _) => Ok(reply),
        _ => Err(RpcError::internal("the operation is not a local one")),
    }
}

/// What a prompt starting with `/name` does: a custom command or `/init`
/// becomes the model's prompt; `/compact` summarises; the others are
/// answered by Spindle itself. Anything else is an ordinary prompt.
pub(in crate::agent::handlers) fn resolve_command(
    d: &mut Dispatcher,
    session_id: &str,
    text: &str,
    registry: &Registry,
) -> Result<(TurnKind, String), RpcError> {
    let Some((name, arguments)) = commands::invocation(text) else {
        return Ok((TurnKind::Model, text.to_string()));
    };
    let cwd = d.checked(session_id).cwd().to_path_buf();
    let available = d.commands_of(&cwd);
    let Some(command) = available.iter().find(|c| c.name == name) else {
        return Ok((TurnKind::Model, text.to_string()));
    };
    let builtin = match &command.kind {
        Kind::Custom { body, .. } => {
            return Ok((TurnKind::Model, commands::expand(body, arguments)))
        }
        Kind::Skill(skill) => {
            return Ok(match commands::skill_prompt(skill, arguments) {
                Ok(prompt) => (TurnKind::Model, prompt),
                Err(why) => (TurnKind::Local(why), text.to_string()),
            })
        }
        Kind::Builtin(builtin) => *builtin,
    };
    let reply = match builtin {
        Builtin::Init => {
            let mut prompt = commands::INIT_PROMPT.to_string();
            if !arguments.is_empty() {
                prompt.push_str("\n\n");
                prompt.push_str(arguments);
            }
            return Ok((TurnKind::Model, prompt));
        }
        Builtin::Compact => {
            return Ok((TurnKind::Compact(arguments.to_string()), text.to_string()))
        }
        Builtin::Reload => reload_reply(d, session_id),
        Builtin::Undo => return Ok((TurnKind::Rewind(Rewind::Undo(1)), text.to_string())),
        Builtin::Redo => return Ok((TurnKind::Rewind(Rewind::Redo), text.to_string())),
        Builtin::Rewind => return Ok((rewind(arguments), text.to_string())),
        Builtin::Help => help_reply(&available),
        Builtin::Memory => {
            memory_reply(&cwd, d.checked(session_id).settings.system_prompt.as_ref())
        }
        Builtin::Skills => crate::agent::common::skills::report(&d.skills_of(&cwd)),
        Builtin::Hooks => d.hooks_of(&cwd, registry).report(),
        Builtin::Cost => cost_reply(d, session_id, registry),
        Builtin::Allow => allow_command(d, session_id, registry, arguments),
        Builtin::Model => command_option(d, session_id, registry, "model", arguments),
        Builtin::Mode => command_option(d, session_id, registry, "mode", arguments),
        Builtin::Clear => clear_conversation(d, session_id)?,
    };
    Ok((TurnKind::Local(reply), text.to_string()))
}

/// `/reload`: reloads the configuration and sends the commands again.
fn reload_reply(d: &mut Dispatcher, session_id: &str) -> String {
    match reload::reload_now(d, session_id) {
        Ok(()) => {
            // The prompt's answer comes from a turn, later: the
            // commands go now.
            d.send_commands(session_id);
            "Reloaded the configuration and the commands.".to_string()
        }
        Err(error) => format!(
            "The reload failed; the old settings stay. {}",
            error.message
        ),
    }
}

/// `/cost`: the tokens so far, their cost, and the context in use.
fn cost_reply(d: &Dispatcher, session_id: &str, registry: &Registry) -> String {
    let session = d.checked(session_id);
    let (usage, spent) = session.usage_so_far();
    let (calls, unreported) = session.calls();
    let mut reply = tokens_words(&usage, calls, unreported);
    let price = registry
        .model(&session.settings.model)
        .and_then(|m| m.config.price.clone());
    reply.push_str(&cost_words(&spent, price.as_ref()));
    let window = registry
        .model(&session.settings.model)
        .map(|m| session.window_of(m));
    match (session.known, window) {
        (Some(known), Some(window)) => {
            let left = 100u64.saturating_sub(known.tokens * 100 / window.max(1));
            reply.push_str(&format!(
                " Context: about {} of {} tokens in use ({left}% left).",
                known.tokens, window
            ));
        }
        (None, Some(window)) if calls > unreported => {
            reply.push_str(&format!(
                " Context: a window of {window} tokens; how much is in use shows after the next request (the conversation changed since the provider last counted it, or its count was not believable)."
            ))
        }
        (None, Some(window)) => reply.push_str(&format!(
            " Context: a window of {window} tokens; how much is in use shows once the provider reports usage."
        )),
        _ => {}
    }
    let lean = crate::agent::turn::is_lean(
        d.options().profile.or(registry.config.profile),
        window.unwrap_or(crate::agent::common::models::DEFAULT_CONTEXT_WINDOW),
    );
    // Without asking whether ripgrep is installed (a process, on the
    // dispatcher's thread): the search tool's two texts differ by a
    // few words.
    let (tokens, count) = crate::agent::turn::first_request(session.cwd(), lean, false);
    reply.push_str(&format!(
        " Prompt before your first word: about {tokens} tokens (profile {}, {count} tools).",
        if lean { "lean" } else { "full" }
    ));
    reply
}

/// `/clear`: forgets the conversation the model sees (the transcript
/// stays).
fn clear_conversation(d: &mut Dispatcher, session_id: &str) -> Result<String, RpcError> {
    if let Some(session) = d.session_mut(session_id) {
        session.messages.clear();
        session.known = None;
        session.set_hook_start(crate::agent::dispatcher::session::StartSource::Clear);
    }
    d.store()?
        .replace_messages(session_id, &[])
        .map_err(internal)?;
    Ok("Started a fresh conversation: the model no longer sees the earlier messages (they stay in the transcript).".to_string())
}

/// `/allow edits` and `/allow command WORDS`: the broad answers a
/// permission request offers only to a client that asked for them,
/// given by the user in words. `--project` saves the rule for the
/// workspace in the user's config; without it, it lasts the session.
/// No argument lists what this session allows.
fn allow_command(
    d: &mut Dispatcher,
    session_id: &str,
    registry: &Registry,
    arguments: &str,
) -> String {
    use crate::policy::rules::{self, Decision, Rule, ToolClass};
    const USAGE: &str = "Use `/allow edits` (every edit inside the workspace) or `/allow command WORDS` (commands starting with those words, e.g. `/allow command cargo test`); add `--project` to save it for this workspace.";
    let mut words: Vec<&str> = arguments.split_whitespace().collect();
    let project = words.last() == Some(&"--project");
    if project {
        words.pop();
    }
    let rule = match words.split_first() {
        None => {
            let session = d.checked(session_id);
            let allowed: Vec<String> = session
                .settings
                .approvals
                .rules
                .iter()
                .filter(|rule| rule.decision == Decision::Allow)
                .map(rules::describe)
                .collect();
            let exact = session.settings.approvals.allowed.len();
            let listed = if allowed.is_empty() {
                "No rule of this session allows anything".to_string()
            } else {
                format!("This session allows {}", allowed.join(", "))
            };
            let claude = crate::config::claude_permissions::ClaudeRules::load(session.cwd())
                .summary(d.trusted(session.cwd()))
                .map(|said| format!(" {said}"))
                .unwrap_or_default();
            return format!("{listed}; {exact} exact calls were allowed always.{claude} {USAGE}");
        }
        Some((&"edits", [])) => Rule::path(ToolClass::Edit, "**", Decision::Allow),
        Some((&"command", prefix)) if !prefix.is_empty() => {
            let rule = Rule::command(prefix.join(" "), Decision::Allow);
            if let Err(problem) = rule.check() {
                return format!("That command pattern cannot be used: {problem}. {USAGE}");
            }
            rule
        }
        _ => return USAGE.to_string(),
    };
    let what = rules::describe(&rule);
    let Some(session) = d.session_mut(session_id) else {
        return USAGE.to_string();
    };
    let mut reply = format!("Allowed {what} for the rest of this session.");
    if project {
        let path = registry
            .config_path
            .clone()
            .unwrap_or_else(crate::config::default_path);
        let root = crate::config::project::key(session.cwd());
        match crate::config::project::add_project_rule(&path, &root, rule.clone()) {
            Ok(()) => {
                reply = format!(
                    "Allowed {what} in this workspace, saved in {}.",
                    path.display()
                )
            }
            Err(error) => {
                reply = format!("{reply} It could not be saved for the project: {error}.")
            }
        }
    }
    session.settings.approvals.rules.push(rule);
    controls::settings_changed(d, session_id);
    reply
}

/// `/model NAME` and `/mode NAME`: the same change as the config option,
/// with its notifications; the reply says what happened.
fn command_option(
    d: &mut Dispatcher,
    session_id: &str,
    registry: &Registry,
    id: &str,
    value: &str,
) -> String {
    let value = if id == "model" {
        registry
            .models
            .iter()
            .find(|m| m.id == value || m.model == value)
            .map(|m| m.id.clone())
            .unwrap_or_else(|| value.to_string())
    } else {
        value.to_string()
    };
    if value.is_empty() {
        let current = match id {
            "model" => d.checked(session_id).settings.model.clone(),
            _ => d.checked(session_id).settings.mode.id().to_string(),
        };
        return format!(
            "The {id} is {current}. The choices are: {}. Change it with `/{id} {}`.",
            choices(registry, id),
            if id == "model" {
                "provider/model"
            } else {
                "plan"
            }
        );
    }
    match controls::change_option(d, session_id, registry, id, &value) {
        Ok(()) => format!("The {id} is now {value}."),
        Err(error) => {
            let reason = error.message.trim_start_matches("Invalid params: ");
            format!("{reason}. The choices are: {}.", choices(registry, id))
        }
    }
}

/// The most models `/model` names; a gateway may list hundreds.
const MODELS_NAMED: usize = 40;

/// What `/model` or `/mode` may be set to, in words.
fn choices(registry: &Registry, id: &str) -> String {
    if id != "model" {
        return "normal, plan".into();
    }
    let mut named: Vec<&str> = registry
        .models
        .iter()
        .take(MODELS_NAMED)
        .map(|m| m.id.as_str())
        .collect();
    let more = registry.models.len().saturating_sub(MODELS_NAMED);
    let more = (more > 0).then(|| format!("and {more} more"));
    named.extend(more.as_deref());
    named.join(", ")
}

/// `/rewind [N]`: undoes N turns (1 to 1000, one when left out), or says
/// what it takes.
fn rewind(arguments: &str) -> TurnKind {
    let steps = match arguments.trim() {
        "" => 1,
        number => match number.parse::<usize>() {
            Ok(steps) if (1..=1000).contains(&steps) => steps,
            _ => {
                return TurnKind::Local(format!(
                    "`/rewind` takes a number of turns from 1 to 1000, not `{number}`."
                ))
            }
        },
    };
    TurnKind::Rewind(Rewind::Undo(steps))
}

/// `/help`: the commands there are, each with its hint and description.
fn help_reply(available: &[commands::Command]) -> String {
    let mut reply = String::from("Commands:\n");
    for command in available {
        let hint = command
            .hint
            .as_deref()
            .map(|h| format!(" {h}"))
            .unwrap_or_default();
        reply.push_str(&format!(
            "- `/{}{hint}` — {}\n",
            command.name, command.description
        ));
    }
    reply
}

/// `/cost`'s words for the tokens so far: the counts the provider
/// reported (cached and reasoning ones only when there are any), said to
/// be a floor when some calls reported nothing, and "not reported" when
/// none did — never a count of 0 that was not counted.
fn tokens_words(usage: &crate::provider::Usage, calls: u64, unreported: u64) -> String {
    let unreported = unreported.min(calls);
    if calls == 0 && usage.input_tokens == 0 && usage.output_tokens == 0 {
        return "Tokens so far: none (no model request yet).".into();
    }
    if calls > 0 && unreported == calls {
        return format!(
            "Tokens so far: not reported — the provider said nothing of what {} used.",
            crate::util::count(calls as usize, "model call", "model calls")
        );
    }
    let mut words = format!("Tokens so far: {} input", usage.input_tokens);
    if usage.cached_tokens > 0 {
        words.push_str(&format!(" ({} cached)", usage.cached_tokens));
    }
    words.push_str(&format!(", {} output", usage.output_tokens));
    if usage.reasoning_tokens > 0 {
        words.push_str(&format!(" ({} reasoning)", usage.reasoning_tokens));
    }
    words.push('.');
    if unreported > 0 {
        words.push_str(&format!(
            " {unreported} of {calls} model calls reported no usage: these counts are a floor."
        ));
    }
    words
}

/// `/cost`'s words for what the session cost: the total when every model
/// call's cost is known; else how many calls had no price, and what the
/// others came to (a floor, not the total); "no price" when nothing is
/// known at all, never a cost of 0.
fn cost_words(spent: &Spend, price: Option<&crate::config::Price>) -> String {
    let currency = currency(price);
    if spent.unpriced_calls > 0 {
        let calls = spent.unpriced_calls + spent.priced_calls;
        let mut words = format!(
            " Cost: unknown — no price for {} of {calls} model calls (the provider reported no cost and the model has no price configured)",
            spent.unpriced_calls
        );
        if spent.priced_calls > 0 {
            words.push_str(&format!(
                "; the other calls cost {:.4} {currency}",
                spent.cost
            ));
        }
        words.push('.');
        words
    } else if spent.priced_calls == 0 && spent.cost == 0.0 && price.is_none() {
        " Cost: no price — the model has no price configured and the provider reported no cost, so there is no cost to show.".into()
    } else {
        format!(" Cost: {:.4} {currency}.", spent.cost)
    }
}

/// `/memory`: every instruction file the model is given, with where it
/// came from, and those left out with why; and the client's system
/// prompt when one is in force.
fn memory_reply(
    cwd: &std::path::Path,
    client: Option<&crate::agent::common::client_prompt::ClientPrompt>,
) -> String {
    use crate::agent::common::prompt;
    let global = prompt::global_instructions_path();
    let listed = prompt::gather(cwd, &global).listed;
    // The reply is Markdown, and its lines quote the repository's paths
    // and import names: each is shown as written, never as a link,
    // emphasis or HTML of the repository's making.
    let shown = |text: &str| crate::util::markdown_text(&crate::util::visible(text, false));
    let mut reply = String::from("Instruction files in force, in the order the model reads them:");
    for line in &listed {
        reply.push_str(&format!("\n- {}", shown(line)));
    }
    if listed.is_empty() {
        reply.push_str("\n- none");
    }
    if !global.is_file() {
        reply.push_str(&format!(
            "\n\nYours for every workspace would be {} (none yet).",
            shown(&global.display().to_string())
        ));
    }
    // Links an editor opens: ACP has no request to open a file.
    reply.push_str("\n\nTo edit one, open it:");
    for path in prompt::editable_files(cwd) {
        let uri = crate::os::paths::to_file_uri(&path.to_string_lossy(), crate::os::paths::NATIVE);
        let link = crate::util::markdown_link(&path.display().to_string(), &uri);
        reply.push_str(&format!("\n- {link}"));
    }
    match client {
        Some(client) => {
            let (effect, first) = crate::agent::common::client_prompt::describe(client);
            reply.push_str(&format!(
                "\n\nYour editor's system prompt is in force: {effect}. It begins:"
            ));
            for line in first {
                reply.push_str(&format!("\n> {}", shown(line)));
            }
        }
        None => reply.push_str("\n\nYour editor gave no system prompt of its own."),
    }
    reply.push_str("\n\nEach folder from the repository root down gives its AGENTS.md, else CLAUDE.md, else GEMINI.md; `@path` in them imports a file. /reload reads them again; the model adds notes with its remember tool.");
    reply
}

#[cfg(test)]
mod tests {
    use super::tokens_words;
    use crate::provider::Usage;

    #[test]
    fn cost_never_shows_a_count_nobody_reported() {
        let none = Usage::default();
        assert_eq!(
            tokens_words(&none, 0, 0),
            "Tokens so far: none (no model request yet)."
        );
        let said = tokens_words(&none, 3, 3);
        assert!(
            said.contains("not reported") && said.contains("3 model calls"),
            "{said}"
        );
        assert!(!said.contains('0'), "{said}");
        let some = Usage {
            input_tokens: 1200,
            output_tokens: 30,
            ..Usage::default()
        };
        // No cached or reasoning tokens reported: not shown as 0.
        assert_eq!(
            tokens_words(&some, 2, 0),
            "Tokens so far: 1200 input, 30 output."
        );
        let floor = tokens_words(&some, 3, 1);
        assert!(
            floor.ends_with("1 of 3 model calls reported no usage: these counts are a floor."),
            "{floor}"
        );
        let cached = Usage {
            cached_tokens: 800,
            reasoning_tokens: 10,
            ..some
        };
        assert_eq!(
            tokens_words(&cached, 1, 0),
            "Tokens so far: 1200 input (800 cached), 30 output (10 reasoning)."
        );
    }
}
