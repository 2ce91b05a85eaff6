//! The tools a step offers the model: the built-ins and the MCP servers'
//! tools, narrowed by the agent file, a subagent's spec, plan mode and
//! goal mode.

use super::Turn;
use crate::provider::ToolSpec;

/// The tools a step offers: every built-in and MCP tool, or in plan mode
/// the read-only ones and `exit_plan`.
pub(super) fn offered_tools(turn: &Turn, read_only: bool) -> Vec<ToolSpec> {
    // Built here, not at start-up: finding out whether ripgrep is
    // installed runs a process, which must not delay `initialize`.
    let mut tools: Vec<ToolSpec> = crate::tools::specs(
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
    if read_only {
        tools.retain(|tool| crate::tools::READ_ONLY.contains(&tool.name.as_str()));
    } else {
        tools.retain(|tool| !crate::tools::PLAN_ONLY.contains(&tool.name.as_str()));
    }
    if turn.workspace.skills.is_empty() {
        tools.retain(|tool| tool.name != "skill");
    }
    if !turn.start.goal_mode {
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
