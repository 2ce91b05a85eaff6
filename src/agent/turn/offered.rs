//! The tools a step offers the model: the built-ins and the MCP servers'
//! tools, narrowed by the agent file, a subagent's spec, plan mode and
//! goal mode.

use super::context;
use super::spec::Turn;
use crate::provider::ToolSpec;
use std::path::Path;

/// The models whose context window is at most this many tokens get the
/// lean profile unless one is chosen.
pub(crate) const LEAN_WINDOW: u64 = 16_384;

/// Whether a turn takes the lean profile: the one chosen (a flag, the
/// agent file, the config), else lean for a model of a small window.
pub fn is_lean(chosen: Option<crate::modes::Profile>, window: u64) -> bool {
    match chosen {
        Some(profile) => profile == crate::modes::Profile::Lean,
        None => window <= LEAN_WINDOW,
    }
}

/// The built-in tools of a profile: in plan mode (`read_only`) the
/// read-only ones and `exit_plan`, else all but `exit_plan`.
fn builtin(lean: bool, read_only: bool, ripgrep: bool, output_cap: usize) -> Vec<ToolSpec> {
    let mut tools = crate::tools::specs(ripgrep, output_cap);
    if lean {
        tools = crate::tools::lean::narrow(tools, ripgrep);
    }
    if read_only {
        tools.retain(|tool| crate::tools::READ_ONLY.contains(&tool.name.as_str()));
    } else {
        tools.retain(|tool| !crate::tools::PLAN_ONLY.contains(&tool.name.as_str()));
    }
    tools
}

/// What an ordinary session sends before the user's first word (the
/// system prompt without its environment and instruction files, and the
/// built-in tools outside plan and goal mode, without skills): its
/// estimated tokens and how many tools.
pub fn first_request(cwd: &Path, lean: bool, ripgrep: bool) -> (u64, usize) {
    let mut tools = builtin(lean, false, ripgrep, crate::tools::COMMAND_OUTPUT_CAP);
    tools.retain(|tool| {
        !crate::tools::GOAL_ONLY.contains(&tool.name.as_str()) && tool.name != "skill"
    });
    let system = crate::agent::common::prompt::base_prompt(cwd, "", lean);
    let bytes = context::fixed_bytes(&system, &tools) as u64;
    (context::tokens_of(bytes), tools.len())
}

/// The tools a step offers: every built-in and MCP tool, or in plan mode
/// the read-only ones and `exit_plan`.
pub(super) fn offered_tools(turn: &Turn, read_only: bool) -> Vec<ToolSpec> {
    // Built here, not at start-up: finding out whether ripgrep is
    // installed runs a process, which must not delay `initialize`.
    let mut tools = builtin(
        turn.rights.lean,
        read_only,
        crate::tools::search::ripgrep_available(),
        turn.workspace.processes.output_cap,
    );
    for agent in turn.rights.agent.iter().chain(&turn.rights.subagent) {
        tools.retain(|tool| agent.allows_tool(&tool.name));
    }
    // A subagent hands out no tasks, asks no one, and cannot change the
    // session's mode.
    if turn.io.client.parent.is_some() {
        tools.retain(|tool| !crate::tools::NOT_FOR_SUBAGENTS.contains(&tool.name.as_str()));
    }
    if turn.workspace.skills.is_empty() {
        tools.retain(|tool| tool.name != "skill");
    }
    if !turn.goal.mode {
        tools.retain(|tool| !crate::tools::GOAL_ONLY.contains(&tool.name.as_str()));
    }
    if let Some(mcp) = &turn.workspace.mcp {
        for tool in mcp.tools() {
            if read_only && !tool.read_only {
                continue;
            }
            if turn
                .rights
                .agent
                .iter()
                .chain(&turn.rights.subagent)
                .any(|agent| !agent.allows_mcp(&tool.server, &tool.name))
            {
                continue;
            }
            tools.push(ToolSpec {
                name: tool.exposed_name,
                description: tool.description,
                parameters: tool.input_schema,
            });
        }
    }
    tools
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The caps hold for the real tools and prompt, with ripgrep or not:
    /// a description that grows past them fails here.
    #[test]
    fn what_is_sent_before_the_first_word_stays_within_its_caps() {
        let cwd = Path::new("/home/someone/projects/workspace");
        for ripgrep in [true, false] {
            let (full, count) = first_request(cwd, false, ripgrep);
            // The safety text counts in the cap too.
            assert!(full <= 2_600, "full profile: {full} tokens");
            assert_eq!(count, 17);
            let (lean, count) = first_request(cwd, true, ripgrep);
            assert!(lean <= 1_200, "lean profile: {lean} tokens");
            assert_eq!(count, crate::tools::lean::CORE.len());
            assert!(lean < full);
        }
    }

    #[test]
    fn lean_offers_the_core_tools_and_exit_plan_in_plan_mode() {
        let names = |read_only| {
            let mut names: Vec<String> = builtin(true, read_only, true, 30_000)
                .into_iter()
                .map(|tool| tool.name)
                .collect();
            names.sort();
            names
        };
        let mut core: Vec<&str> = crate::tools::lean::CORE.to_vec();
        core.sort();
        assert_eq!(names(false), core);
        let mut plan: Vec<&str> = core
            .iter()
            .copied()
            .filter(|name| crate::tools::READ_ONLY.contains(name))
            .chain(["exit_plan"])
            .collect();
        plan.sort();
        assert_eq!(
            plan,
            [
                "exit_plan",
                "glob",
                "list_directory",
                "read_file",
                "search",
                "todo_write"
            ]
        );
        assert_eq!(names(true), plan);
        // The full profile in plan mode has more (task, fetch_url, ...).
        assert!(builtin(false, true, true, 30_000).len() > plan.len());
    }

    #[test]
    fn small_windows_are_lean_unless_a_profile_is_chosen() {
        use crate::modes::Profile;
        assert!(is_lean(None, 16_384) && is_lean(None, 8_192));
        assert!(!is_lean(None, 16_385) && !is_lean(None, 128_000));
        assert!(!is_lean(Some(Profile::Full), 8_192));
        assert!(is_lean(Some(Profile::Lean), 1_000_000));
    }
}
