#!/usr/bin/env python3
"""A small ACP client on the official Python SDK (`agent-client-protocol`)
that drives Spindle through the interop flows.

It advertises the editor's file system and terminal, implements them (reads
come from an "editor buffer" when one is open, so a read through the editor
can be told from a read of the disk), answers permission requests by tool
kind, and watches every message: each one the agent sends is validated
against the SDK's own pydantic models, every error answer and every error
the SDK logs counts against the flow that was running.

Usage: python_client.py --spindle BIN --scenario FILE --workdir DIR
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
from pathlib import Path

from pydantic import ValidationError

from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp import schema as S
from acp.connection import StreamDirection, StreamEvent

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    FIRST_PROCESS_PROMPTS,
    FLOWS,
    FlowFailure,
    Report,
    Scenario,
    check,
    prepare_workspace,
    spindle_args,
)

CLIENT = "python-sdk"
FLOW_TIMEOUT = 30.0
WAIT_TIMEOUT = 10.0

# The SDK model of each answer, request and notification the agent sends.
RESPONSE_MODELS = {
    "initialize": S.InitializeResponse,
    "session/new": S.NewSessionResponse,
    "session/load": S.LoadSessionResponse,
    "session/list": S.ListSessionsResponse,
    "session/resume": S.ResumeSessionResponse,
    "session/set_mode": S.SetSessionModeResponse,
    "session/set_config_option": S.SetSessionConfigOptionResponse,
    "session/prompt": S.PromptResponse,
}
REQUEST_MODELS = {
    "session/request_permission": S.RequestPermissionRequest,
    "fs/read_text_file": S.ReadTextFileRequest,
    "fs/write_text_file": S.WriteTextFileRequest,
    "terminal/create": S.CreateTerminalRequest,
    "terminal/output": S.TerminalOutputRequest,
    "terminal/wait_for_exit": S.WaitForTerminalExitRequest,
    "terminal/kill": S.KillTerminalRequest,
    "terminal/release": S.ReleaseTerminalRequest,
}
NOTIFICATION_MODELS = {"session/update": S.SessionNotification}


class Wire:
    """Sees every raw message through the SDK's stream observer."""

    def __init__(self) -> None:
        self.incoming: list[dict] = []
        self.our_requests: dict[object, str] = {}
        self.agent_requests: dict[object, str] = {}
        self.violations: list[str] = []

    def observe(self, event: StreamEvent) -> None:
        message = event.message
        if event.direction == StreamDirection.OUTGOING:
            if "method" in message and "id" in message:
                self.our_requests[message["id"]] = message["method"]
            elif "error" in message:
                method = self.agent_requests.get(message.get("id"), "?")
                self.violations.append(f"our {method} handler answered with an error: {message['error']}")
            return
        self.incoming.append(message)
        try:
            self._validate(message)
        except ValidationError as error:
            self.violations.append(f"invalid message {str(message)[:300]}: {error}")

    def _validate(self, message: dict) -> None:
        method = message.get("method")
        if method is not None and "id" in message:
            self.agent_requests[message["id"]] = method
            model = REQUEST_MODELS.get(method)
            if model is None:
                self.violations.append(f"unexpected request from the agent: {method}")
            else:
                model.model_validate(message.get("params"))
        elif method is not None and method.startswith("_"):
            # This client never asks for Spindle's notifications in
            # `initialize`, so none may come (a vendor notification is
            # what other clients print as an error).
            self.violations.append(f"a vendor notification nobody asked for: {method}")
        elif method is not None:
            model = NOTIFICATION_MODELS.get(method)
            if model is None:
                self.violations.append(f"unexpected notification from the agent: {method}")
            else:
                model.model_validate(message.get("params"))
        else:
            method = self.our_requests.get(message.get("id"), "?")
            if "error" in message:
                self.violations.append(f"the agent answered {method} with an error: {message['error']}")
            elif method in RESPONSE_MODELS:
                RESPONSE_MODELS[method].model_validate(message.get("result") or {})


class SdkErrorLog(logging.Handler):
    """Errors the SDK logs (a notification it could not parse, a handler
    that raised) are violations too: a client must not choke silently."""

    def __init__(self, wire: Wire) -> None:
        super().__init__(level=logging.ERROR)
        self.wire = wire

    def emit(self, record: logging.LogRecord) -> None:
        self.wire.violations.append(f"the SDK logged an error: {record.getMessage()}")


class Terminal:
    def __init__(self, process: asyncio.subprocess.Process, limit: int | None) -> None:
        self.process = process
        self.limit = limit
        self.output = bytearray()
        self.truncated = False
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while chunk := await self.process.stdout.read(4096):
            self.output += chunk
            if self.limit is not None and len(self.output) > self.limit:
                # Drop from the beginning, on a character boundary.
                cut = len(self.output) - self.limit
                while cut < len(self.output) and (self.output[cut] & 0xC0) == 0x80:
                    cut += 1
                del self.output[:cut]
                self.truncated = True

    def exit_status(self) -> S.TerminalExitStatus | None:
        code = self.process.returncode
        if code is None:
            return None
        if code < 0:
            return S.TerminalExitStatus(exit_code=None, signal=f"signal {-code}")
        return S.TerminalExitStatus(exit_code=code, signal=None)


class EditorClient:
    """The editor side: buffers, terminals, permission answers, updates."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, object]] = []
        self.tool_kinds: dict[str, str] = {}
        self.permission_answers: dict[str, str] = {}
        self.permission_log: list[dict] = []
        self.fs_log: list[tuple[str, str]] = []
        self.buffers: dict[str, str] = {}
        self.terminals: dict[str, Terminal] = {}
        self.terminal_log: list[tuple[str, str]] = []
        self.next_terminal = 0

    # --- session/update -------------------------------------------------
    async def session_update(self, session_id: str, update: object, **kwargs: object) -> None:
        self.updates.append((session_id, update))
        if isinstance(update, S.ToolCallStart) and update.kind:
            self.tool_kinds[update.tool_call_id] = update.kind

    def updates_of(self, session_id: str, start: int = 0) -> list:
        return [u for s, u in self.updates[start:] if s == session_id]

    # --- permissions ----------------------------------------------------
    async def request_permission(self, options, session_id, tool_call, **kwargs):
        kind = tool_call.kind or self.tool_kinds.get(tool_call.tool_call_id)
        wanted = self.permission_answers.get(kind or "", "reject_once")
        self.permission_log.append({"kind": kind, "title": tool_call.title, "answer": wanted})
        option = next((o for o in options if o.kind == wanted), None)
        if option is None:
            return S.RequestPermissionResponse(outcome=S.DeniedOutcome(outcome="cancelled"))
        return S.RequestPermissionResponse(
            outcome=S.AllowedOutcome(outcome="selected", option_id=option.option_id)
        )

    # --- file system ----------------------------------------------------
    async def read_text_file(self, session_id, path, line=None, limit=None, **kwargs):
        self.fs_log.append(("read", path))
        if path in self.buffers:
            text = self.buffers[path]
        else:
            text = Path(path).read_text()
        if line is not None or limit is not None:
            lines = text.splitlines(keepends=True)
            first = (line or 1) - 1
            text = "".join(lines[first : first + limit if limit is not None else None])
        return S.ReadTextFileResponse(content=text)

    async def write_text_file(self, session_id, path, content, **kwargs):
        self.fs_log.append(("write", path))
        # The editor saves what the agent wrote and keeps the buffer in step.
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(content)
        if path in self.buffers:
            self.buffers[path] = content
        return S.WriteTextFileResponse()

    # --- terminals ------------------------------------------------------
    async def create_terminal(self, session_id, command, args=None, env=None, cwd=None, output_byte_limit=None, **kwargs):
        environment = dict(os.environ)
        for variable in env or []:
            environment[variable.name] = variable.value
        process = await asyncio.create_subprocess_exec(
            command,
            *(args or []),
            cwd=cwd,
            env=environment,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        self.next_terminal += 1
        terminal_id = f"term-{self.next_terminal}"
        self.terminals[terminal_id] = Terminal(process, output_byte_limit)
        self.terminal_log.append(("create", terminal_id))
        return S.CreateTerminalResponse(terminal_id=terminal_id)

    def _terminal(self, terminal_id: str) -> Terminal:
        terminal = self.terminals.get(terminal_id)
        if terminal is None:
            from acp import RequestError

            raise RequestError(-32002, f"no terminal {terminal_id}")
        return terminal

    async def terminal_output(self, session_id, terminal_id, **kwargs):
        self.terminal_log.append(("output", terminal_id))
        terminal = self._terminal(terminal_id)
        if terminal.process.returncode is not None:
            await terminal.reader
        return S.TerminalOutputResponse(
            output=terminal.output.decode(errors="replace"),
            truncated=terminal.truncated,
            exit_status=terminal.exit_status(),
        )

    async def wait_for_terminal_exit(self, session_id, terminal_id, **kwargs):
        self.terminal_log.append(("wait_for_exit", terminal_id))
        terminal = self._terminal(terminal_id)
        await terminal.process.wait()
        await terminal.reader
        status = terminal.exit_status()
        return S.WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    async def kill_terminal(self, session_id, terminal_id, **kwargs):
        self.terminal_log.append(("kill", terminal_id))
        terminal = self._terminal(terminal_id)
        if terminal.process.returncode is None:
            terminal.process.kill()
        return S.KillTerminalResponse()

    async def release_terminal(self, session_id, terminal_id, **kwargs):
        self.terminal_log.append(("release", terminal_id))
        terminal = self.terminals.pop(terminal_id, None)
        if terminal is not None and terminal.process.returncode is None:
            terminal.process.kill()
            await terminal.process.wait()
        return S.ReleaseTerminalResponse()

    async def close(self) -> None:
        for terminal in self.terminals.values():
            if terminal.process.returncode is None:
                terminal.process.kill()
                await terminal.process.wait()
        self.terminals.clear()

    def on_connect(self, conn) -> None:
        pass


async def wait_until(predicate, what: str, timeout: float = WAIT_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise FlowFailure(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def joined(updates: list, kind: str) -> str:
    return "".join(u.content.text for u in updates if u.session_update == kind and isinstance(u.content, S.TextContentBlock))


def final_statuses(updates: list) -> dict[str, dict]:
    calls: dict[str, dict] = {}
    for update in updates:
        if isinstance(update, (S.ToolCallStart, S.ToolCallProgress)):
            call = calls.setdefault(update.tool_call_id, {"kind": None, "status": None, "content": []})
            if update.kind:
                call["kind"] = update.kind
            if update.status:
                call["status"] = update.status
            if update.content is not None:
                call["content"] = update.content
    return calls


class Run:
    """One run of every flow against one agent binary."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.spindle = args.spindle
        self.scenario = Scenario(Path(args.scenario).resolve())
        self.workdir = Path(args.workdir).resolve()
        self.workspace = prepare_workspace(self.workdir / "workspace")
        self.db = self.workdir / "sessions.db"
        self.report = Report(CLIENT)
        self.wire = Wire()
        logging.getLogger().addHandler(SdkErrorLog(self.wire))
        self.exit_codes: list[str] = []
        self.session_id: str | None = None
        self.agents = 0
        self.stderr_files: list = []

    async def flow(self, name: str, body, requires: tuple[str, ...] = ()) -> None:
        blocker = self.report.blocked_by(requires)
        if blocker:
            self.report.emit("FAIL", name, f"not run: {blocker} did not pass")
            return
        before = len(self.wire.violations)
        error: BaseException | None = None
        detail = None
        try:
            detail = await asyncio.wait_for(body(), FLOW_TIMEOUT)
        except asyncio.TimeoutError:
            error = FlowFailure(f"the flow did not finish within {FLOW_TIMEOUT:.0f} s")
        except Exception as caught:  # noqa: BLE001 - every failure is a result
            error = caught
        # Give late messages of this flow a moment to be checked with it.
        await asyncio.sleep(0.05)
        violations = self.wire.violations[before:]
        if violations:
            # A message the client could not take is the cause; what went
            # wrong next (often a wait that timed out) comes after it.
            later = f"; then: {error}" if error is not None else ""
            error = FlowFailure("; ".join(violations[:3]) + later)
        self.report.outcome(name, error, detail)

    def agent(self, client: EditorClient):
        self.agents += 1
        # Kept open for the life of the run: the agent inherits the descriptor.
        stderr = open(self.workdir / f"agent-{self.agents}.stderr", "wb")  # noqa: SIM115
        self.stderr_files.append(stderr)
        env = {"SPINDLE_HOME": os.environ.get("SPINDLE_HOME", str(self.workdir / "home"))}
        if "RUST_LOG" in os.environ:
            env["RUST_LOG"] = os.environ["RUST_LOG"]
        return spawn_agent_process(
            client,
            self.spindle,
            *spindle_args(self.scenario.path, self.db),
            cwd=self.workspace,
            env=env,
            transport_kwargs={"stderr": stderr.fileno()},
            observers=[self.wire.observe],
        )

    async def initialize(self, conn) -> S.InitializeResponse:
        return await conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=S.ClientCapabilities(
                fs=S.FileSystemCapabilities(read_text_file=True, write_text_file=True),
                terminal=True,
            ),
            client_info=S.Implementation(name="spindle-interop-python", version="1.0.0"),
        )

    async def prompt(self, conn, session_id: str, text: str):
        return await conn.prompt(session_id=session_id, prompt=[text_block(text)])

    def record_exit(self, process, label: str) -> None:
        self.exit_codes.append(f"{label}={process.returncode}")

    # --- the first agent process ---------------------------------------
    async def first_process(self) -> None:
        client = EditorClient()
        async with self.agent(client) as (conn, process):
            await self.flow("initialize", lambda: self.check_initialize(conn))
            await self.flow("new_session", lambda: self.check_new_session(conn), ("initialize",))
            await self.flow("stream", lambda: self.check_stream(conn, client), ("new_session",))
            await self.flow("tools_permissions", lambda: self.check_tools(conn, client), ("new_session",))
            await self.flow("editor_fs", lambda: self.check_editor_fs(client), ("tools_permissions",))
            await self.flow("editor_terminal", lambda: self.check_terminal(conn, client), ("new_session",))
            await self.flow("cancel", lambda: self.check_cancel(conn, client), ("new_session",))
            await self.flow("set_mode", lambda: self.check_set_mode(conn, client), ("initialize",))
            await self.flow("set_config_option", lambda: self.check_config(conn, client), ("initialize",))
            await client.close()
        self.record_exit(process, "first")

    async def check_initialize(self, conn) -> str:
        answer = await self.initialize(conn)
        check(answer.protocol_version == 1, f"protocolVersion {answer.protocol_version}, wanted 1")
        capabilities = answer.agent_capabilities
        check(capabilities is not None and capabilities.load_session, "loadSession is not advertised")
        sessions = capabilities.session_capabilities
        check(sessions is not None and sessions.list is not None and sessions.resume is not None,
              "session/list and session/resume are not advertised")
        info = answer.agent_info
        return f"{info.name} {info.version}" if info else "no agentInfo"

    async def check_new_session(self, conn) -> str:
        answer = await conn.new_session(cwd=str(self.workspace), mcp_servers=[])
        self.session_id = answer.session_id
        check(answer.modes is not None, "no modes in the session/new answer")
        modes = [mode.id for mode in answer.modes.available_modes]
        check({"normal", "plan"} <= set(modes), f"modes {modes}")
        check(answer.modes.current_mode_id == "normal", f"current mode {answer.modes.current_mode_id}")
        options = {option.root.id if hasattr(option, "root") else option.id for option in answer.config_options or []}
        check({"mode", "tool_approval", "agent_preset"} <= options, f"config options {sorted(options)}")
        return f"session {answer.session_id}, modes {modes}, {len(options)} config options"

    async def check_stream(self, conn, client: EditorClient) -> str:
        prompt = "interop: stream"
        start = len(client.updates)
        answer = await self.prompt(conn, self.session_id, prompt)
        check(answer.stop_reason == "end_turn", f"stopReason {answer.stop_reason}")
        updates = client.updates_of(self.session_id, start)
        thought, text = joined(updates, "agent_thought_chunk"), joined(updates, "agent_message_chunk")
        check(thought == self.scenario.thought(prompt), f"thought {thought!r}")
        check(text == self.scenario.text(prompt), f"text {text!r}")
        chunks = [u.session_update for u in updates if u.session_update.endswith("_chunk")]
        check(chunks.count("agent_message_chunk") > 1, "the text came in one chunk, not streamed")
        last_thought = max(i for i, kind in enumerate(chunks) if kind == "agent_thought_chunk")
        first_text = chunks.index("agent_message_chunk")
        check(last_thought < first_text, "thought chunks came after text chunks")
        return f"{chunks.count('agent_thought_chunk')} thought and {chunks.count('agent_message_chunk')} text chunks"

    async def check_tools(self, conn, client: EditorClient) -> str:
        notes = str(self.workspace / "notes.txt")
        # An unsaved line in the editor's buffer: the agent must see it, so
        # its reads and writes go through the editor, not the disk.
        client.buffers[notes] = (self.workspace / "notes.txt").read_text() + "unsaved: yes\n"
        client.permission_answers = {"edit": "allow_once", "execute": "reject_once"}
        start, fs_start, terminals = len(client.updates), len(client.fs_log), len(client.terminal_log)
        answer = await self.prompt(conn, self.session_id, "interop: tools")
        check(answer.stop_reason == "end_turn", f"stopReason {answer.stop_reason}")
        asked = [(p["kind"], p["answer"]) for p in client.permission_log]
        check(asked == [("edit", "allow_once"), ("execute", "reject_once")], f"permission requests {asked}")
        calls = final_statuses(client.updates_of(self.session_id, start))
        by_kind = {call["kind"]: call for call in calls.values()}
        check(set(by_kind) == {"read", "edit", "execute"}, f"tool calls {calls}")
        check(by_kind["read"]["status"] == "completed", f"read ended {by_kind['read']['status']}")
        check(by_kind["edit"]["status"] == "completed", f"edit ended {by_kind['edit']['status']}")
        check(by_kind["execute"]["status"] == "failed", f"rejected command ended {by_kind['execute']['status']}")
        read_text = str(by_kind["read"]["content"])
        check("unsaved: yes" in read_text, "the read did not show the editor's unsaved buffer")
        diffs = [c for c in by_kind["edit"]["content"] if getattr(c, "type", None) == "diff"]
        check(diffs and "status: reviewed" in diffs[0].new_text, f"edit content {by_kind['edit']['content']}")
        on_disk = (self.workspace / "notes.txt").read_text()
        check(on_disk == "title: interop notes\nstatus: reviewed\nunsaved: yes\n", f"notes.txt is {on_disk!r}")
        check(not (self.workspace / "rejected.txt").exists(), "the rejected command ran")
        check(len(client.terminal_log) == terminals, "a terminal was created for the rejected command")
        text = joined(client.updates_of(self.session_id, start), "agent_message_chunk")
        check(text == self.scenario.text("interop: tools"), f"text {text!r}")
        self.tools_fs = client.fs_log[fs_start:]
        del client.buffers[notes]
        return "read completed, edit allowed and applied, command rejected and not run"

    async def check_editor_fs(self, client: EditorClient) -> str:
        notes = str(self.workspace / "notes.txt")
        operations = [op for op, path in self.tools_fs if path == notes]
        check("read" in operations and "write" in operations, f"fs requests {self.tools_fs}")
        return f"fs requests for notes.txt: {operations}"

    async def check_terminal(self, conn, client: EditorClient) -> str:
        prompt = "interop: terminal"
        client.permission_answers = {"execute": "allow_once"}
        start, log_start = len(client.updates), len(client.terminal_log)
        answer = await self.prompt(conn, self.session_id, prompt)
        check(answer.stop_reason == "end_turn", f"stopReason {answer.stop_reason}")
        steps = client.terminal_log[log_start:]
        check(steps and steps[0][0] == "create", f"terminal requests {steps}")
        terminal_id = steps[0][1]
        methods = [method for method, _ in steps]
        check(methods[-1] == "release" and "wait_for_exit" in methods and "output" in methods,
              f"terminal requests {methods}")
        check(terminal_id not in client.terminals, "the terminal was not released")
        updates = client.updates_of(self.session_id, start)
        calls = final_statuses(updates)
        check(len(calls) == 1, f"tool calls {calls}")
        call = next(iter(calls.values()))
        check(call["status"] == "completed", f"the command ended {call['status']}")
        embedded = [
            u for u in updates
            if isinstance(u, S.ToolCallProgress)
            and any(getattr(c, "type", None) == "terminal" and c.terminal_id == terminal_id for c in u.content or [])
        ]
        check(embedded, "the terminal was not embedded in the tool call")
        text = joined(updates, "agent_message_chunk")
        check(text == self.scenario.text(prompt), f"text {text!r}")
        return f"terminal requests {methods}"

    async def check_cancel(self, conn, client: EditorClient) -> str:
        prompt = "interop: slow"
        start = len(client.updates)

        def streamed() -> str:
            return joined(client.updates_of(self.session_id, start), "agent_message_chunk")

        running = asyncio.create_task(self.prompt(conn, self.session_id, prompt))
        await wait_until(lambda: streamed() or running.done(), "the slow stream to start")
        check(not running.done(), "the slow prompt ended before it could be cancelled")
        cancelled_at = time.monotonic()
        await conn.cancel(session_id=self.session_id)
        answer = await asyncio.wait_for(running, 5)
        elapsed = time.monotonic() - cancelled_at
        check(answer.stop_reason == "cancelled", f"stopReason {answer.stop_reason}")
        check(elapsed < 2, f"the cancel took {elapsed:.2f} s")
        partial = streamed()
        full = self.scenario.text(prompt)
        check(full.startswith(partial) and partial != full, f"streamed {partial!r} of {full!r}")
        after = len(client.updates)
        await asyncio.sleep(0.5)
        late = client.updates_of(self.session_id, after)
        check(not late, f"updates after the cancelled answer: {late}")
        follow = "interop: after cancel"
        start = len(client.updates)
        answer = await self.prompt(conn, self.session_id, follow)
        check(answer.stop_reason == "end_turn", f"follow-up stopReason {answer.stop_reason}")
        text = joined(client.updates_of(self.session_id, start), "agent_message_chunk")
        check(text == self.scenario.text(follow), f"follow-up text {text!r}")
        return f"cancelled after {len(partial.split())} words in {elapsed * 1000:.0f} ms; follow-up answered"

    async def mode_session(self, conn) -> str:
        if getattr(self, "second_session", None) is None:
            answer = await conn.new_session(cwd=str(self.workspace), mcp_servers=[])
            self.second_session = answer.session_id
        return self.second_session

    async def check_set_mode(self, conn, client: EditorClient) -> str:
        session = await self.mode_session(conn)

        def modes_seen(start: int) -> list[str]:
            return [u.current_mode_id for u in client.updates_of(session, start) if u.session_update == "current_mode_update"]

        start = len(client.updates)
        await conn.set_session_mode(session_id=session, mode_id="plan")
        await wait_until(lambda: modes_seen(start) == ["plan"], "current_mode_update plan")
        prompt = "interop: plan"
        start = len(client.updates)
        answer = await self.prompt(conn, session, prompt)
        check(answer.stop_reason == "end_turn", f"plan prompt stopReason {answer.stop_reason}")
        plans = [u for u in client.updates_of(session, start) if u.session_update == "plan"]
        check(plans and len(plans[-1].entries) == 2, f"plan updates {plans}")
        start = len(client.updates)
        await conn.set_session_mode(session_id=session, mode_id="normal")
        await wait_until(lambda: modes_seen(start) == ["normal"], "current_mode_update normal")
        return "normal → plan (plan update with 2 entries) → normal"

    async def check_config(self, conn, client: EditorClient) -> str:
        session = await self.mode_session(conn)

        def current(answer, config_id: str):
            for option in answer.config_options:
                option = getattr(option, "root", option)
                if option.id == config_id:
                    return option.current_value
            raise FlowFailure(f"{config_id} missing from the answer")

        for config_id, value in [("tool_approval", "auto"), ("agent_preset", "delivery"), ("tool_approval", "ask"), ("agent_preset", "light")]:
            answer = await conn.set_config_option(session_id=session, config_id=config_id, value=value)
            check(current(answer, config_id) == value, f"{config_id} is {current(answer, config_id)} after setting {value}")
        start = len(client.updates)
        answer = await conn.set_config_option(session_id=session, config_id="mode", value="plan")
        check(current(answer, "mode") == "plan", "mode did not change to plan")
        await wait_until(
            lambda: any(u.session_update == "current_mode_update" and u.current_mode_id == "plan" for u in client.updates_of(session, start)),
            "current_mode_update after setting the mode option",
        )
        answer = await conn.set_config_option(session_id=session, config_id="mode", value="normal")
        check(current(answer, "mode") == "normal", "mode did not change back to normal")
        return "tool_approval auto/ask, agent_preset delivery/light, mode plan/normal"

    # --- later agent processes ------------------------------------------
    async def second_process(self) -> None:
        client = EditorClient()
        async with self.agent(client) as (conn, process):
            await self.flow("session_list", lambda: self.check_list(conn), ("stream",))
            await self.flow("session_load", lambda: self.check_load(conn, client), ("session_list",))
            await client.close()
        self.record_exit(process, "load")

    async def check_list(self, conn) -> str:
        await self.initialize(conn)
        answer = await conn.list_sessions(cwd=str(self.workspace))
        listed = {info.session_id: info for info in answer.sessions}
        check(self.session_id in listed, f"{self.session_id} not in {list(listed)}")
        info = listed[self.session_id]
        check(info.cwd == str(self.workspace), f"cwd {info.cwd}")
        check(info.title == "interop: stream", f"title {info.title!r}")
        return f"{len(listed)} sessions in the workspace, title {info.title!r}"

    async def check_load(self, conn, client: EditorClient) -> str:
        first = len(self.wire.incoming)
        answer = await conn.load_session(cwd=str(self.workspace), session_id=self.session_id, mcp_servers=[])
        check(answer is not None, "no answer")
        messages = self.wire.incoming[first:]
        answer_at = next(i for i, m in enumerate(messages) if "id" in m and "method" not in m)
        replay = [m["params"]["update"] for m in messages[:answer_at] if m.get("method") == "session/update"]
        late = [m for m in messages[answer_at + 1 :] if m.get("method") == "session/update"
                and m["params"]["update"]["sessionUpdate"].endswith("_chunk")]
        check(not late, "replayed chunks arrived after the load answer")
        users = [u["content"]["text"] for u in replay if u["sessionUpdate"] == "user_message_chunk"]
        check(users == FIRST_PROCESS_PROMPTS, f"replayed user messages {users}")
        texts = "".join(u["content"].get("text", "") for u in replay if u["sessionUpdate"] == "agent_message_chunk")
        check(self.scenario.text("interop: stream") in texts, "the streamed answer was not replayed")
        thoughts = "".join(u["content"].get("text", "") for u in replay if u["sessionUpdate"] == "agent_thought_chunk")
        check(self.scenario.thought("interop: stream") in thoughts, "the thought was not replayed")
        kinds = [u.get("kind") for u in replay if u["sessionUpdate"] == "tool_call"]
        check(kinds == ["read", "edit", "execute", "execute"], f"replayed tool calls {kinds}")
        follow = "interop: after load"
        start = len(client.updates)
        result = await self.prompt(conn, self.session_id, follow)
        check(result.stop_reason == "end_turn", f"stopReason after load {result.stop_reason}")
        text = joined(client.updates_of(self.session_id, start), "agent_message_chunk")
        check(text == self.scenario.text(follow), f"text after load {text!r}")
        return f"{len(replay)} updates replayed before the answer; {len(users)} user messages; follow-up answered"

    async def third_process(self) -> None:
        client = EditorClient()
        async with self.agent(client) as (conn, process):
            await self.flow("session_resume", lambda: self.check_resume(conn, client), ("stream",))
            await client.close()
        self.record_exit(process, "resume")

    async def check_resume(self, conn, client: EditorClient) -> str:
        await self.initialize(conn)
        start = len(client.updates)
        answer = await conn.resume_session(cwd=str(self.workspace), session_id=self.session_id, mcp_servers=[])
        check(answer.modes is not None and answer.config_options, "no modes or config options in the answer")
        await asyncio.sleep(0.1)
        replayed = [u for u in client.updates_of(self.session_id, start) if u.session_update.endswith("_chunk")]
        check(not replayed, f"resume replayed {len(replayed)} chunks")
        follow = "interop: after resume"
        result = await self.prompt(conn, self.session_id, follow)
        check(result.stop_reason == "end_turn", f"stopReason after resume {result.stop_reason}")
        text = joined(client.updates_of(self.session_id, start), "agent_message_chunk")
        check(text == self.scenario.text(follow), f"text after resume {text!r}")
        return "no replay; follow-up answered"

    async def main(self) -> None:
        await self.first_process()
        await self.second_process()
        await self.third_process()

        async def exits() -> str:
            check(all(code.endswith("=0") for code in self.exit_codes),
                  f"exit codes after stdin closed: {self.exit_codes} (the SDK terminates an agent still running after 2 s)")
            return ", ".join(self.exit_codes)

        await self.flow("agent_exit", exits)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spindle", required=True)
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    run = Run(args)
    asyncio.run(run.main())
    missing = [flow for flow in FLOWS if flow not in run.report.outcomes]
    for flow in missing:
        run.report.emit("FAIL", flow, "the client did not run this flow")
    return 0


if __name__ == "__main__":
    sys.exit(main())
