//! The steps of the model/tool loop (`drive.rs` runs them, the model
//! request itself is in `model_call.rs`): what a turn does once before
//! its first request, the checks before each model request, the answer
//! taken into the conversation and what follows it (decided as an
//! `AfterAnswer` the loop acts on), and the tool calls it asked for with
//! what they end.

use super::context;
use super::goals::{apply_goal_reports, commit_goal, goal_running};
use super::runner::{CallResult, Runner};
use super::spec::Turn;
use super::state::{
    add_call_usage, answer_unrun, limit_reached, publish_usage, report_usage, take_steers, State,
    Step,
};
use super::updates::UpdateSink;
use super::{offered, report, subagent};
use crate::acp::StopReason;
use crate::agent::common::permission::Policy;
use crate::provider::{Finish, Message, Outcome, ToolSpec};
use crate::rpc::RpcError;
use std::cell::RefCell;
use std::time::Instant;

/// What the loop carries from step to step. Plan mode may end during
/// the turn (`exit_plan`): then the tools, the policy and the read-only
/// flag change for the steps that follow.
pub(super) struct Loop<'t> {
    read_only: bool,
    policy: Policy,
    pub(super) tools: Vec<ToolSpec>,
    /// The bytes of the system prompt and the tools.
    pub(super) fixed: usize,
    keeper: context::Keeper<'t>,
    pub(super) refused_as_too_long: bool,
    /// Model calls since the turn (or the goal's last boundary) began.
    steps: usize,
    /// When the turn started, and the goal's time spent before it.
    started: (Instant, u64),
    /// The identical tool calls in a row so far, across goal continuations.
    calls: super::loops::CallStreak,
    /// Whether the model was already told, this turn, that an answer of
    /// its repeated itself (the next one that does ends the turn).
    pub(super) text_told: bool,
    /// The loop itself, for a subagent's turn.
    drive: subagent::Drive,
}

impl<'t> Loop<'t> {
    pub(super) fn new(turn: &'t Turn, state: &State, drive: subagent::Drive) -> Loop<'t> {
        let tools = offered::offered_tools(turn, turn.rights.read_only);
        let started = Instant::now();
        let elapsed_before = state.goal.as_ref().map_or(0, |g| g.counters.elapsed_ms);
        Loop {
            read_only: turn.rights.read_only,
            policy: turn.rights.policy,
            fixed: context::fixed_bytes(&turn.conversation.system, &tools),
            tools,
            keeper: context::Keeper {
                dir: turn.workspace.processes.session_dir.as_deref(),
            },
            refused_as_too_long: false,
            steps: 0,
            started: (started, elapsed_before),
            calls: super::loops::CallStreak::new(&turn.steps.loops),
            text_told: false,
            drive,
        }
    }
}

impl Loop<'_> {
    /// The tools the next request offers.
    pub(super) fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }

    /// The same request goes out again (after a wait, a fallback, a
    /// compaction): it is not another step.
    pub(super) fn send_again(&mut self) {
        self.steps -= 1;
    }
}

/// Before the first request: images the model does not take become
/// notes, and the MCP servers that failed since the last turn are named.
pub(super) fn prepare(cx: &mut Step) {
    let turn = cx.turn;
    if !turn.model.images {
        for message in cx.messages.iter_mut().filter(|m| !m.images.is_empty()) {
            for image in std::mem::take(&mut message.images) {
                message.text.push_str(&format!(
                    "\n(The image {} cannot be shown to this model, which does not take images.)",
                    image.path.display()
                ));
            }
        }
    }
    // Built here, not at start-up: finding out whether ripgrep is installed
    // runs a process, which must not delay `initialize`.
    if let Some(mcp) = &turn.workspace.mcp {
        mcp.begin_turn();
        // Servers that failed since the last turn are named once, so the
        // user knows why their tools are missing.
        for (server, reason) in mcp.take_failures() {
            cx.sink
                .updates
                .borrow_mut()
                .notice(&crate::acp::fit::Notice::warning(
                    format!("MCP server `{server}` is not available"),
                    format!(
                        "{} Its tools are withdrawn.",
                        crate::util::sentence(&reason.message)
                    ),
                ));
        }
    }
}

/// The checks before a model request (the goal's budget, a cancel, the
/// step limit, an agent's limits), the conversation fitted to the
/// window, the steers that arrived, and the last step stored. `Some`
/// when the turn ends here.
pub(super) fn before_request(
    cx: &mut Step,
    run: &mut Loop,
) -> Option<Result<StopReason, RpcError>> {
    let turn = cx.turn;
    if goal_out_of_budget(cx, run.started) {
        return Some(Ok(StopReason::MaxTurnRequests));
    }
    if turn.io.cancel.is_cancelled() {
        return Some(Ok(StopReason::Cancelled));
    }
    if run.steps >= turn.steps.max {
        // Said in the conversation too: a stop reason alone shows nothing
        // in most clients.
        cx.sink.updates
            .borrow_mut()
            .notice(&crate::acp::fit::Notice::warning(
                "The turn stopped at its step limit",
                format!(
                    "It made {}, the most one turn may make (--max-steps, or the preset's limit). Send another prompt to go on.",
                    crate::util::count(turn.steps.max, "model request", "model requests")
                ),
            ));
        return Some(Ok(StopReason::MaxTurnRequests));
    }
    // A subagent may have spent the rest of the turn's limits.
    if let Some(reached) = turn
        .rights
        .agent
        .as_deref()
        .and_then(|a| limit_reached(a, cx.state))
    {
        say_limit_reached(cx.sink, &reached);
        return Some(Ok(StopReason::MaxTokens));
    }
    let pressure = super::compaction::Pressure::Threshold;
    if let super::compaction::Fitted::Cancelled = super::compaction::fit(cx, run.fixed, pressure) {
        return Some(Ok(StopReason::Cancelled));
    }
    // A prompt that leaves no room for an answer even after compacting
    // is not sent (the server would refuse it, or answer nothing), nor
    // kept: it would be carried into every later request.
    if run.steps == 0 && turn.conversation.fresh > 0 {
        if let Some((tokens, window)) =
            super::compaction::no_room(turn, cx.state, run.fixed, cx.messages)
        {
            cx.state.prompt_dropped = true;
            return Some(Err(RpcError::new(
                crate::rpc::code::INVALID_PARAMS,
                format!(
                    "The prompt does not fit: with the conversation, system prompt and tools it is about {tokens} tokens, and the model's window is {window}, leaving no room for an answer. It was not sent and is not kept; send a shorter prompt or attach less, or /compact or /clear the conversation."
                ),
            )
            .with_data(serde_json::json!({
                "code": "prompt_too_large",
                "tokens": tokens,
                "window": window,
            }))));
        }
    }
    // Steers that arrived meanwhile join the conversation here, the
    // safe boundary: after the step's tool results, before the next
    // model request. The system prompt and tools stay as they were.
    let applied = take_steers(turn, cx.sink, cx.state, cx.messages);
    // Every completed step is stored before the next provider request,
    // with the steers it applied.
    if run.steps > 0 || !applied.is_empty() {
        if let Some(record) = cx.record.as_mut() {
            record.step_marking(
                &turn.io.session_id,
                cx.sink.updates,
                &cx.state.added,
                &applied,
            );
        }
    }
    run.steps += 1;
    None
}

/// A running goal's time is counted; past a budget it stops, marked so.
fn goal_out_of_budget(cx: &mut Step, started: (Instant, u64)) -> bool {
    let turn = cx.turn;
    if !goal_running(cx.state) {
        return false;
    }
    let Some(goal) = cx.state.goal.as_mut() else {
        return false;
    };
    goal.counters.elapsed_ms = started.1 + started.0.elapsed().as_millis() as u64;
    let Some(what) = goal.budget.exhausted(&goal.counters) else {
        return false;
    };
    log::info!(
        "the goal of session {} ran out of {what}",
        turn.io.session_id
    );
    goal.status = crate::agent::common::goal::Status::BudgetExhausted;
    goal.checkpoint = format!(
        "{} (Stopped: the budget of {what} ran out.)",
        goal.checkpoint
    )
    .trim()
    .to_string();
    commit_goal(turn, cx.state, cx.record, cx.sink.updates);
    true
}

pub(super) fn say_limit_reached(sink: &mut UpdateSink, reached: &str) {
    sink.begin_message();
    sink.updates.borrow_mut().chunk(
        false,
        &sink.message_id,
        &format!("_This agent's limit of {reached} per turn is reached; I stopped here._"),
    );
}

/// Takes the model's answer into the conversation (with its tool calls
/// and what the provider wants back), counts its usage, and says so
/// when it is empty. The stop reason when the model ended its turn.
pub(super) fn take_answer(
    cx: &mut Step,
    run: &Loop,
    outcome: &Outcome,
    mut assistant: Option<Message>,
) -> Option<StopReason> {
    let turn = cx.turn;
    let cost = add_call_usage(turn, outcome, cx.state);
    if let Some(goal) = cx.state.goal.as_mut() {
        goal.counters.model_calls += 1;
        // A budget counts what is known to have been spent.
        goal.counters.cost += cost.unwrap_or(0.0);
        if let Some(usage) = &outcome.usage {
            let counters = &mut goal.counters;
            counters.input_tokens = counters.input_tokens.saturating_add(usage.input_tokens);
            counters.output_tokens = counters.output_tokens.saturating_add(usage.output_tokens);
        }
    }
    let stop = match outcome.finish {
        Finish::ToolUse => None,
        Finish::EndTurn => Some(StopReason::EndTurn),
        Finish::MaxTokens => Some(StopReason::MaxTokens),
        Finish::Refusal => Some(StopReason::Refusal),
    };
    // An answer with nothing in it would end the turn with nothing
    // shown: say so, in the transcript as well.
    if assistant.is_none() && outcome.tool_calls.is_empty() && stop.is_some() {
        cx.sink.begin_message();
        cx.sink.updates.borrow_mut().chunk(
            false,
            &cx.sink.message_id,
            "_The model returned an empty answer._",
        );
    }
    if !outcome.tool_calls.is_empty() || !outcome.provider_data.is_null() {
        let message = assistant.get_or_insert_with(|| Message::assistant("", ""));
        message.tool_calls = outcome.tool_calls.clone();
        // Signed thinking and encrypted reasoning go back verbatim.
        message.provider_data = outcome.provider_data.clone();
    }
    if let Some(message) = assistant {
        cx.messages.push(message.clone());
        cx.state.added.push(message);
    }
    if let Some(usage) = &outcome.usage {
        // The next request sends this conversation, answer included.
        let tokens = usage.input_tokens.saturating_add(usage.output_tokens);
        let bytes = context::request_bytes(run.fixed, cx.messages);
        // A count far below what the bytes could be (some servers
        // report zeros) would hide a full window: estimate instead.
        cx.state.known =
            context::plausible(tokens, bytes).then_some(context::Known { tokens, bytes });
        report_usage(turn, tokens, cx.state, cx.sink.updates);
    }
    stop
}

/// What is known of a step's answer when what follows it is decided.
#[derive(Debug, Default)]
pub(super) struct Answered {
    /// The turn was cancelled.
    pub(super) cancelled: bool,
    /// How the model ended its answer, if it ended its turn.
    pub(super) stop: Option<StopReason>,
    /// A goal runs (goal mode).
    pub(super) goal_running: bool,
    /// The answer called tools.
    pub(super) calls: bool,
    /// `Stop` hooks are set, and the turn is not a subagent's.
    pub(super) stop_hooks: bool,
    /// An agent file's per-turn limit that is reached, in words.
    pub(super) limit: Option<String>,
}

/// What is known of the answer now (see `after_answer`).
pub(super) fn answered(cx: &Step, outcome: &Outcome, stop: Option<StopReason>) -> Answered {
    let turn = cx.turn;
    Answered {
        cancelled: turn.io.cancel.is_cancelled(),
        stop,
        goal_running: goal_running(cx.state),
        calls: !outcome.tool_calls.is_empty(),
        stop_hooks: super::hooks::stop_hooks_set(turn),
        limit: turn
            .rights
            .agent
            .as_deref()
            .and_then(|a| limit_reached(a, cx.state)),
    }
}

/// What follows a step's answer, for the loop (`drive.rs`) to do.
#[derive(Debug, PartialEq)]
pub(super) enum AfterAnswer {
    /// The answer's tool calls run.
    Calls,
    /// The turn was cancelled: its calls are answered unrun, and it ends.
    Cancelled,
    /// The model ended a step of a running goal: a continuation boundary,
    /// where the goal stops or goes on (`goal_boundary`).
    GoalBoundary,
    /// The model would end the turn: the `Stop` hooks may send it back to
    /// work (`stop_hooks`); if not, the turn ends.
    StopHooks,
    /// The model ended its turn, ran out of tokens or refused: calls it
    /// made are answered unrun, and the turn ends so.
    Stop(StopReason),
    /// An agent file's per-turn limit is reached: the calls are answered
    /// unrun, it is said, and the turn ends with `max_tokens`.
    LimitReached(String),
}

/// Decides what follows a step's answer: a cancel first, then the
/// model's own end (a goal's boundary, the `Stop` hooks, or the end),
/// then an agent's limits; else the tool calls.
pub(super) fn after_answer(answered: Answered) -> AfterAnswer {
    if answered.cancelled {
        return AfterAnswer::Cancelled;
    }
    let ended = answered.stop == Some(StopReason::EndTurn);
    if ended && answered.goal_running {
        return AfterAnswer::GoalBoundary;
    }
    if ended && !answered.calls && answered.stop_hooks {
        return AfterAnswer::StopHooks;
    }
    if let Some(stop) = answered.stop {
        return AfterAnswer::Stop(stop);
    }
    match answered.limit {
        Some(reached) => AfterAnswer::LimitReached(reached),
        None => AfterAnswer::Calls,
    }
}

/// At a goal's continuation boundary: the stop reason when the goal
/// stops here (paused, or out of budget); else the model is told to go
/// on and the step count starts over.
pub(super) fn goal_boundary(cx: &mut Step, run: &mut Loop) -> Option<StopReason> {
    let turn = cx.turn;
    if let Some(end) = super::goals::goal_boundary(turn, cx.state, run.started) {
        commit_goal(turn, cx.state, cx.record, cx.sink.updates);
        return Some(end);
    }
    let message = Message::user(
        cx.state
            .goal
            .as_ref()
            .map(|g| g.continuation())
            .unwrap_or_default(),
    );
    add_results(cx.messages, cx.state, vec![message]);
    commit_goal(turn, cx.state, cx.record, cx.sink.updates);
    run.steps = 0;
    None
}

/// When the model would end the turn: whether a `Stop` hook sent it back
/// to work (then with the hook's message added).
pub(super) fn stop_hooks(cx: &mut Step) -> bool {
    let Some(message) = super::hooks::stop_blocked(cx.turn, cx.sink.updates, cx.state) else {
        return false;
    };
    add_results(cx.messages, cx.state, vec![message]);
    true
}

/// What a step's tool calls gave: their results, and what stopped them.
#[derive(Default)]
pub(super) struct Calls {
    results: Vec<Message>,
    /// How many calls had run when the turn was cancelled.
    cancelled_at: Option<usize>,
    /// How many had run when the user declined one, what, and whether
    /// nobody could be asked instead.
    declined: Option<(usize, String, bool)>,
    /// The policy the user picked leaving plan mode.
    switched: Option<Policy>,
    /// A question the editor could not ask: the turn ends with it.
    question: Option<String>,
    /// The model's goal reports of this step.
    goal_reports: Vec<crate::tools::GoalUpdateArgs>,
    /// How many calls had run when one repeated too often, and why.
    looped: Option<(usize, String)>,
}

/// Runs the step's tool calls in order (a `task` as a subagent), until
/// one is cancelled, declined or asks the user.
pub(super) fn run_calls(
    cx: &mut Step,
    run: &mut Loop,
    (calls, repairs): (
        &[crate::provider::ToolCallRequest],
        &super::recover::Repairs,
    ),
) -> Calls {
    let turn = cx.turn;
    let checkpoints = cx.checkpoints;
    let mut runner = Runner {
        session_id: &turn.io.session_id,
        root: &turn.workspace.root,
        client: &turn.io.client,
        updates: cx.sink.updates,
        cancel: &turn.io.cancel,
        mcp: turn.workspace.mcp.as_deref(),
        read_only: run.read_only,
        policy: run.policy,
        approvals: &mut cx.state.approvals,
        processes: &turn.workspace.processes,
        on_reject: turn.rights.on_reject,
        checkpoints,
        rules: &turn.rights.rules,
        config_path: turn.workspace.config_path.as_deref(),
        trust: &turn.workspace.trust,
        live: &turn.io.live,
        goal_updates: RefCell::new(Vec::new()),
        jobs: &turn.workspace.jobs,
        epoch: turn.io.epoch,
        agent: turn.rights.agent.as_deref(),
        subagent: turn.rights.subagent.as_deref(),
        extra_roots: &turn.workspace.extra_roots,
        skills: &turn.workspace.skills,
        hooks: &turn.workspace.hooks,
        hook_ask: false,
        repaired: false,
        editor_texts: Default::default(),
    };
    let mut done = Calls::default();
    if let Some(goal) = cx.state.goal.as_mut() {
        goal.counters.tool_calls += calls.len() as u64;
        if calls.iter().any(|c| c.name == "run_command") {
            goal.verified = true;
        }
    }
    for (index, call) in calls.iter().enumerate() {
        if let super::loops::Verdict::Stop(why) = run.calls.before(call) {
            done.looped = Some((index, why));
            break;
        }
        runner.repaired = repairs.note(index).is_some();
        let mut result: CallResult = if let Some(error) = repairs.refused(index) {
            runner.refuse_unreadable(call, error)
        } else if call.name == "task" && turn.io.client.parent.is_none() {
            // Its hooks as any call's, under Claude Code's name (`Task`).
            let mut spent = subagent::Spent::default();
            let result = runner.run_hooked(call, |runner, raw_input, _| {
                let announced = runner.hook_ask;
                if announced {
                    let title = match crate::tools::parse(&call.name, &call.arguments) {
                        Ok(tool) => crate::tools::title(&tool, runner.root),
                        Err(_) => call.name.clone(),
                    };
                    if let Some(refused) = runner.asked_by_hook(call, title, raw_input) {
                        return refused;
                    }
                }
                let parent = subagent::Parent {
                    drive: run.drive,
                    turn,
                    sink: cx.sink,
                    checkpoints,
                    spent_before: (&cx.state.usage, cx.state.spend),
                };
                let (result, used) = subagent::run_task(&parent, runner.approvals, call, announced);
                spent = used;
                result
            });
            cx.state.usage.add(&spent.usage);
            cx.state.spend.add(&spent.spend);
            cx.state.model_calls += spent.model_calls;
            cx.state.usage_reports += spent.usage_reports;
            publish_usage(turn, &cx.state.usage, cx.state.spend);
            result
        } else {
            runner.run(call)
        };
        if let Some(note) = repairs.note(index) {
            result.text = format!("{}\n\n{note}", result.text);
        }
        // A question the editor could not ask gets its result from the
        // user's next prompt (the dispatcher adds it then).
        if result.question.is_none() {
            let polling = super::loops::polls_running_job(&turn.workspace.jobs, call);
            let note = run.calls.after(call, &result.text, polling);
            let mut message = Message::tool_result(&call.id, result.text);
            context::spill(&mut message, turn.window.tool_output_cap, &run.keeper);
            if let Some(note) = note {
                message.text.push_str(&format!("\n\n[{note}]"));
            }
            done.results.push(message);
        }
        if result.cancelled {
            done.cancelled_at = Some(index + 1);
            break;
        }
        if let Some(what) = result.declined {
            done.declined = Some((index + 1, what, result.unasked));
            break;
        }
        if let Some(new_policy) = result.switched {
            done.switched = Some(new_policy);
        }
        if let Some(asked) = result.question {
            done.question = Some(asked);
            break;
        }
    }
    done.goal_reports = runner.goal_updates.take();
    done
}

/// After the tool calls: the goal reports applied, plan mode left, the
/// results added, and the turn ended by a cancel, a question or a
/// rejection. `Some` when the turn ends here.
pub(super) fn after_calls(
    cx: &mut Step,
    run: &mut Loop,
    outcome: &Outcome,
    calls: Calls,
) -> Option<Result<StopReason, RpcError>> {
    let turn = cx.turn;
    if let Some(end) = apply_goal_reports(&turn.goal, cx.sink, cx.state, calls.goal_reports) {
        add_results(cx.messages, cx.state, calls.results);
        commit_goal(turn, cx.state, cx.record, cx.sink.updates);
        return Some(Ok(end));
    }
    if let Some(new_policy) = calls.switched {
        run.read_only = false;
        run.policy = new_policy;
        run.tools = offered::offered_tools(turn, false);
        run.fixed = context::fixed_bytes(&turn.conversation.system, &run.tools);
        turn.io.client.report(report::Report::ModeChanged {
            session_id: turn.io.session_id.clone(),
            policy: run.policy,
        });
    }
    add_results(cx.messages, cx.state, calls.results);
    let halt = halt(
        calls.looped,
        calls.cancelled_at,
        calls.question,
        calls.declined,
    )?;
    // The calls after the one that ended the turn never ran; a question's
    // are answered with the user's next prompt (in order).
    if let Some(done) = halt.unrun_from() {
        answer_unrun(&outcome.tool_calls[done..], cx.messages, cx.state);
    }
    let (stop, said) = match halt {
        Halt::Looped { why, .. } => {
            super::loops::say_stopped(cx.sink, &why);
            (StopReason::EndTurn, None)
        }
        Halt::Cancelled { .. } => (StopReason::Cancelled, None),
        // The question ends the turn; the user's next prompt is its
        // result.
        Halt::Asked(asked) => (StopReason::EndTurn, Some(asked)),
        // The user said no (or could not be asked): the turn ends here,
        // and says so.
        Halt::Declined { what, unasked, .. } => {
            let what = what.replace('_', "\\_");
            let note = match unasked {
                true => {
                    format!("_{what} needs approval, and nobody could be asked. I stopped here._")
                }
                false => format!(
                    "_You declined: {what}. I stopped here; tell me how you want to go on._"
                ),
            };
            (StopReason::EndTurn, Some(note))
        }
    };
    if let Some(text) = said {
        cx.sink.begin_message();
        cx.sink
            .updates
            .borrow_mut()
            .chunk(false, &cx.sink.message_id, &text);
    }
    Some(Ok(stop))
}

/// What ends the turn after a step's tool calls.
#[derive(Debug, PartialEq)]
enum Halt {
    /// A call repeated too often; `done` calls had run.
    Looped { done: usize, why: String },
    /// The turn was cancelled after `done` calls.
    Cancelled { done: usize },
    /// A question the editor could not ask.
    Asked(String),
    /// The user declined the call after `done - 1` (or nobody could be
    /// asked): what, and whether nobody could.
    Declined {
        done: usize,
        what: String,
        unasked: bool,
    },
}

impl Halt {
    /// Where the calls that never ran and are answered now begin.
    fn unrun_from(&self) -> Option<usize> {
        match self {
            Halt::Looped { done, .. } | Halt::Cancelled { done } | Halt::Declined { done, .. } => {
                Some(*done)
            }
            Halt::Asked(_) => None,
        }
    }
}

/// Decides whether a step's calls end the turn, and how: a call repeated
/// too often first, then a cancel, a question, a refusal.
fn halt(
    looped: Option<(usize, String)>,
    cancelled_at: Option<usize>,
    question: Option<String>,
    declined: Option<(usize, String, bool)>,
) -> Option<Halt> {
    if let Some((done, why)) = looped {
        return Some(Halt::Looped { done, why });
    }
    if let Some(done) = cancelled_at {
        return Some(Halt::Cancelled { done });
    }
    if let Some(asked) = question {
        return Some(Halt::Asked(asked));
    }
    declined.map(|(done, what, unasked)| Halt::Declined {
        done,
        what,
        unasked,
    })
}

fn add_results(messages: &mut Vec<Message>, state: &mut State, results: Vec<Message>) {
    for message in results {
        messages.push(message.clone());
        state.added.push(message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_call_ends_the_step_before_a_cancel_or_a_question() {
        let halted = halt(
            Some((1, "the same call".into())),
            Some(2),
            Some("which file?".into()),
            None,
        );
        assert_eq!(
            halted,
            Some(Halt::Looped {
                done: 1,
                why: "the same call".into()
            })
        );
        let halted = halt(None, Some(2), Some("which file?".into()), None);
        assert_eq!(halted, Some(Halt::Cancelled { done: 2 }));
    }

    #[test]
    fn a_question_leaves_the_later_calls_for_the_next_prompt() {
        let halted = halt(None, None, Some("which file?".into()), None).expect("a halt");
        assert_eq!(halted.unrun_from(), None);
        let declined = halt(None, None, None, Some((3, "edit".into(), false))).expect("a halt");
        assert_eq!(declined.unrun_from(), Some(3));
    }

    fn ended() -> Answered {
        Answered {
            stop: Some(StopReason::EndTurn),
            ..Answered::default()
        }
    }

    #[test]
    fn a_cancel_ends_the_step_before_anything_else() {
        let answered = Answered {
            cancelled: true,
            goal_running: true,
            stop_hooks: true,
            limit: Some("100 tokens".into()),
            ..ended()
        };
        assert_eq!(after_answer(answered), AfterAnswer::Cancelled);
    }

    #[test]
    fn a_running_goal_takes_the_models_end_as_a_boundary() {
        let answered = Answered {
            goal_running: true,
            stop_hooks: true,
            ..ended()
        };
        assert_eq!(after_answer(answered), AfterAnswer::GoalBoundary);
        // Running out of tokens is no boundary: the turn ends.
        let answered = Answered {
            stop: Some(StopReason::MaxTokens),
            goal_running: true,
            ..Answered::default()
        };
        assert_eq!(
            after_answer(answered),
            AfterAnswer::Stop(StopReason::MaxTokens)
        );
    }

    #[test]
    fn stop_hooks_are_asked_only_when_the_model_ends_without_calls() {
        let answered = Answered {
            stop_hooks: true,
            ..ended()
        };
        assert_eq!(after_answer(answered), AfterAnswer::StopHooks);
        let with_calls = Answered {
            stop_hooks: true,
            calls: true,
            ..ended()
        };
        assert_eq!(
            after_answer(with_calls),
            AfterAnswer::Stop(StopReason::EndTurn)
        );
        assert_eq!(
            after_answer(ended()),
            AfterAnswer::Stop(StopReason::EndTurn)
        );
        let refused = Answered {
            stop: Some(StopReason::Refusal),
            stop_hooks: true,
            ..Answered::default()
        };
        assert_eq!(
            after_answer(refused),
            AfterAnswer::Stop(StopReason::Refusal)
        );
    }

    #[test]
    fn an_agents_limit_ends_a_step_that_would_run_calls() {
        let answered = Answered {
            calls: true,
            limit: Some("100 tokens".into()),
            ..Answered::default()
        };
        assert_eq!(
            after_answer(answered),
            AfterAnswer::LimitReached("100 tokens".into())
        );
        // The model's own end is said before the limit.
        let answered = Answered {
            limit: Some("100 tokens".into()),
            ..ended()
        };
        assert_eq!(
            after_answer(answered),
            AfterAnswer::Stop(StopReason::EndTurn)
        );
    }

    #[test]
    fn an_answer_with_calls_goes_on_to_them() {
        let answered = Answered {
            calls: true,
            goal_running: true,
            stop_hooks: true,
            ..Answered::default()
        };
        assert_eq!(after_answer(answered), AfterAnswer::Calls);
    }

    #[test]
    fn calls_that_all_ran_go_on() {
        assert_eq!(halt(None, None, None, None), None);
    }
}
