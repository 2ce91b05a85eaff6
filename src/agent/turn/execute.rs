//! Carrying out a permitted built-in tool call: reading, writing,
//! searching, fetching, planning, and starting commands.

use super::edits::changed;
use super::processes::Confinement;
use super::runner::{completed_text, failed, text_content, Ending, Runner};
use crate::acp::{PlanEntry, PlanEntryPriority, PlanEntryStatus, SessionUpdate};
use crate::provider::ToolCallRequest;
use crate::tools::{self, files, paths, search, walk, Tool};
use crate::util::fence;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

impl Runner<'_> {
    pub(super) fn execute(
        &self,
        call: &ToolCallRequest,
        tool: &Tool,
        target: Option<&paths::Resolved>,
        confinement: Confinement,
    ) -> Ending {
        let editor = self.editor();
        let cancelled = || self.cancel.is_cancelled();
        let path = target
            .map(|t| t.path.clone())
            .unwrap_or_else(|| self.root.to_path_buf());
        match tool {
            Tool::ApplyPatch(_) | Tool::DeleteFile(_) | Tool::MoveFile(_) => {
                self.change_files(tool, &editor)
            }
            Tool::ExitPlan(_) => failed("Error: exit_plan is answered by the user"),
            Tool::AskUser(_) => failed("Error: ask_user is answered by the user"),
            Tool::Task(_) => {
                failed("Error: a subagent cannot hand out tasks of its own; do the work yourself")
            }
            Tool::FetchUrl(args) => self.fetch(args),
            Tool::Remember(args) => {
                if args.project() && !target.is_some_and(|t| t.inside) {
                    return failed(
                        "Error: the project's instruction file links out of the workspace; nothing was written",
                    );
                }
                // Another name of the file may lie anywhere: the note would
                // land in a file the approval did not name.
                if args.project() && crate::tools::paths::hard_linked(&path) {
                    return failed(
                        "Error: the project's instruction file has another name (a hard link), perhaps outside the workspace; nothing was written",
                    );
                }
                let written = self.with_note(&path, args).and_then(|text| {
                    files::write_file(&path, &text, &editor, self.processes.file_limits)
                        .map_err(String::from)
                });
                match written {
                    Ok(_) => completed_text(format!("Noted in {}.", path.display())),
                    Err(error) => failed(format!("Error: {error}")),
                }
            }
            Tool::Skill(args) => {
                let Some(skill) = self.skills.iter().find(|s| s.name == args.name) else {
                    let names: Vec<&str> = self.skills.iter().map(|s| s.name.as_str()).collect();
                    return failed(format!(
                        "Error: there is no skill {:?}; the skills are: {}",
                        args.name,
                        names.join(", ")
                    ));
                };
                let loaded = match &args.file {
                    Some(file) => skill.file(file),
                    None => skill.load(),
                };
                match loaded {
                    Ok(text) => completed_text(text),
                    Err(error) => failed(format!("Error: {error}")),
                }
            }
            Tool::JobOutput(args) => self.job_output(args),
            Tool::JobStop(args) => match self.jobs.kill(&args.job_id) {
                Ok(info) => {
                    completed_text(format!("Stopped job {} (`{}`).", info.job_id, info.command))
                }
                Err(error) => failed(format!("Error: {error}")),
            },
            Tool::GoalUpdate(args) => {
                if let Some(todos) = &args.todos {
                    self.publish_plan(todos);
                }
                self.goal_updates.borrow_mut().push(args.clone());
                completed_text("Goal update recorded.".into())
            }
            Tool::ReadFile(args) => {
                match files::read_file(
                    &path,
                    args.start_line,
                    args.line_count,
                    &editor,
                    self.processes.file_limits,
                ) {
                    Ok(result) => Ending::Completed {
                        content: vec![text_content(&fence(&result.text))],
                        text: result.text,
                    },
                    Err(error) => failed(format!("Error: {error}")),
                }
            }
            Tool::WriteFile(args) => {
                match files::write_file(&path, &args.content, &editor, self.processes.file_limits) {
                    Ok(change) => changed(&path, change),
                    Err(error) => failed(format!("Error: {error}")),
                }
            }
            Tool::EditFile(args) => {
                match files::edit_file(&path, &args.edits, &editor, self.processes.file_limits) {
                    Ok((change, _line)) => changed(&path, change),
                    Err(error) => failed(format!("Error: {error}")),
                }
            }
            Tool::ListDirectory(_) => {
                match walk::list_directory(self.root, &path, tools::LIST_LIMIT) {
                    Ok(text) => completed_text(text),
                    Err(error) => failed(format!("Error: {error}")),
                }
            }
            Tool::Glob(args) => {
                match walk::glob(
                    self.root,
                    &path,
                    &args.pattern,
                    tools::GLOB_LIMIT,
                    &cancelled,
                ) {
                    Ok(result) => completed_text(walk::render_glob(self.root, &result)),
                    Err(error) => failed(format!("Error: {error}")),
                }
            }
            Tool::Search(args) => {
                let query = search::SearchQuery {
                    pattern: args.pattern.clone(),
                    regex: args.regex,
                    case_insensitive: args.case_insensitive,
                    glob: args.glob.clone(),
                    max_results: tools::SEARCH_LIMIT,
                };
                match search::search(self.root, &path, &query, &cancelled) {
                    Ok(result) => completed_text(result.text),
                    Err(error) => failed(format!("Error: {error}")),
                }
            }
            Tool::RunCommand(args) => self.run_command(call, args, &path, confinement),
            Tool::TodoWrite(args) => self.todo_write(args),
        }
    }

    /// `fetch_url`: the request runs beside the turn, which waits for it
    /// or for a cancel, whichever comes first.
    fn fetch(&self, args: &tools::FetchUrlArgs) -> Ending {
        let max = args
            .max_chars
            .unwrap_or(tools::fetch::TEXT_CAP)
            .clamp(1, tools::fetch::TEXT_CAP);
        let url = args.url.clone();
        let trust = self.trust.clone();
        let (done, answer) = crossbeam_channel::bounded(1);
        let spawned = std::thread::Builder::new()
            .name("spindle-fetch".into())
            .spawn(move || {
                let _ = done.send(tools::fetch::fetch(&url, max, &trust));
            });
        if spawned.is_err() {
            return failed("Error: cannot start the fetch");
        }
        crossbeam_channel::select! {
            recv(answer) -> result => match result {
                Ok(Ok(text)) => completed_text(text),
                Ok(Err(error)) => failed(format!("Error: {error}")),
                Err(_) => failed("Error: the fetch failed"),
            },
            recv(self.cancel.signal()) -> _ => Ending::Cancelled,
        }
    }

    /// `run_command`: in the given folder, confined as permitted, with a
    /// timeout; in the editor's terminal when it offers one, or as a
    /// background job.
    fn run_command(
        &self,
        call: &ToolCallRequest,
        args: &tools::RunCommandArgs,
        path: &Path,
        confinement: Confinement,
    ) -> Ending {
        if !path.is_dir() {
            return failed(format!(
                "Error: the working directory {} does not exist",
                path.display()
            ));
        }
        let timeout = Duration::from_secs(
            args.timeout_seconds
                .unwrap_or(tools::COMMAND_TIMEOUT_DEFAULT)
                .clamp(1, tools::COMMAND_TIMEOUT_MAX),
        );
        let launch = match self.processes.launch(self.root, path, confinement) {
            Ok(launch) => launch,
            Err(error) => return failed(format!("Error: {error}")),
        };
        if args.background {
            // In the editor's terminal when it offers one: a dev
            // server the user can watch there.
            if self.client.capabilities.terminal {
                return self.start_terminal_job(&args.command, path, &launch);
            }
            return self.start_job(&args.command, path, launch);
        }
        let watch = launch.watch.clone();
        let ending = if self.client.capabilities.terminal {
            self.run_in_terminal(call, &args.command, path, timeout, &launch)
        } else {
            self.run_locally(call, &args.command, path, timeout, launch)
        };
        match watch.and_then(|watch| watch.sweep()) {
            Some(note) => self.protected_created(ending, note),
            None => ending,
        }
    }

    /// A sandboxed command created a file Spindle would run: it was moved
    /// aside; the model and the user are told, and the call fails.
    fn protected_created(&self, ending: Ending, note: String) -> Ending {
        self.updates
            .borrow_mut()
            .notice(&crate::acp::fit::Notice::warning(
                "A command created a protected file",
                note.clone(),
            ));
        match ending {
            Ending::Completed { text, .. } | Ending::Failed { text, .. } => {
                failed(format!("{text}\n{note}"))
            }
            Ending::Cancelled => Ending::Cancelled,
        }
    }

    /// `todo_write`: the list becomes the plan.
    fn todo_write(&self, args: &tools::TodoWriteArgs) -> Ending {
        self.publish_plan(&args.todos);
        let done = args
            .todos
            .iter()
            .filter(|t| t.status == tools::TodoStatus::Completed)
            .count();
        completed_text(format!(
            "Plan updated: {} items, {done} completed.",
            args.todos.len()
        ))
    }

    /// Shows the todo list as the plan, and keeps it for status.
    fn publish_plan(&self, todos: &[tools::Todo]) {
        let entries: Vec<PlanEntry> = todos
            .iter()
            .map(|todo| PlanEntry {
                content: todo.content.clone(),
                priority: match todo.priority {
                    Some(tools::TodoPriority::High) => PlanEntryPriority::High,
                    Some(tools::TodoPriority::Medium) | None => PlanEntryPriority::Medium,
                    Some(tools::TodoPriority::Low) => PlanEntryPriority::Low,
                },
                status: match todo.status {
                    tools::TodoStatus::Pending => PlanEntryStatus::Pending,
                    tools::TodoStatus::InProgress => PlanEntryStatus::InProgress,
                    tools::TodoStatus::Completed => PlanEntryStatus::Completed,
                },
            })
            .collect();
        if let Ok(mut live) = self.live.lock() {
            live.plan = Value::Array(entries.iter().map(PlanEntry::to_value).collect());
        }
        self.update(SessionUpdate::Plan { entries });
    }
}
