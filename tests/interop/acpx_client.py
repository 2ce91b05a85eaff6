#!/usr/bin/env python3
"""Drives `acpx`, the headless ACP command-line client, against Spindle the
way a user would: `sessions new --name`, `exec`, `prompt -s NAME`, `cancel`,
`set-mode`, `set`, `sessions list`.

acpx starts the agent itself (through `tap.py`, which logs the wire), keeps
its own state under $HOME/.acpx (HOME is a folder of this run) and leaves a
"queue owner" process running after each prompt for its --ttl; the driver
uses `--ttl 1` and waits for those processes to end between steps, so each
step that needs a new agent process gets one. Checks use acpx's exit code
and output (`--format json` prints the ACP messages it received) and the
wire log.

Usage: acpx_client.py --spindle BIN --scenario FILE --workdir DIR --acpx BIN
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    FLOWS,
    FlowFailure,
    Report,
    Scenario,
    check,
    log,
    prepare_workspace,
    spindle_args,
)

CLIENT = "acpx"
SESSION = "interop"
COMMAND_TIMEOUT = 60


class Acpx:
    def __init__(self, args: argparse.Namespace) -> None:
        self.acpx = str(Path(args.acpx).resolve())
        self.spindle = args.spindle
        self.scenario = Scenario(Path(args.scenario).resolve())
        self.workdir = Path(args.workdir).resolve()
        self.workspace = prepare_workspace(self.workdir / "workspace")
        self.home = self.workdir / "acpx-home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.wire_log = self.workdir / "wire.ndjson"
        self.wire_log.touch()
        self.hide_resume = self.workdir / "hide-resume"
        self.agent = self.workdir / "agent"
        tap = Path(__file__).resolve().parent / "tap.py"
        command = [
            sys.executable, str(tap), "--log", str(self.wire_log), "--hide-resume-if", str(self.hide_resume), "--",
            self.spindle, *spindle_args(self.scenario.path, self.workdir / "sessions.db"),
        ]
        self.agent.write_text("#!/bin/sh\nexec " + shlex.join(command) + "\n")
        self.agent.chmod(0o755)
        self.env = dict(os.environ)
        self.env["HOME"] = str(self.home)
        self.env.setdefault("SPINDLE_HOME", str(self.workdir / "spindle-home"))
        self.report = Report(CLIENT)
        self.calls = 0
        self.session_id: str | None = None

    # --- running acpx -----------------------------------------------------
    def base(self, ttl: float = 0.2) -> list[str]:
        return [self.acpx, "--agent", str(self.agent), "--cwd", str(self.workspace), "--ttl", str(ttl), "--timeout", "30"]

    def run(self, *arguments: str, ttl: float = 0.2, expect: int | None = 0) -> subprocess.CompletedProcess:
        self.calls += 1
        command = [*self.base(ttl), *arguments]
        log(f"$ acpx {shlex.join(command[1:])}")
        result = subprocess.run(command, env=self.env, cwd=self.workspace, capture_output=True, text=True,
                                timeout=COMMAND_TIMEOUT, stdin=subprocess.DEVNULL)
        (self.workdir / f"acpx-{self.calls}.out").write_text(result.stdout)
        (self.workdir / f"acpx-{self.calls}.err").write_text(result.stderr)
        if expect is not None and result.returncode != expect:
            raise FlowFailure(
                f"acpx {' '.join(arguments)} exited {result.returncode}: {(result.stderr or result.stdout).strip()[-400:]}"
            )
        return result

    def start(self, *arguments: str, ttl: float = 0.2) -> tuple[subprocess.Popen, Path]:
        self.calls += 1
        command = [*self.base(ttl), *arguments]
        log(f"$ acpx {shlex.join(command[1:])} &")
        out = self.workdir / f"acpx-{self.calls}.out"
        err = self.workdir / f"acpx-{self.calls}.err"
        process = subprocess.Popen(command, env=self.env, cwd=self.workspace, stdin=subprocess.DEVNULL,
                                   stdout=out.open("w"), stderr=err.open("w"))
        return process, out

    # --- processes of this run ------------------------------------------
    def our_processes(self) -> list[int]:
        """Agents (the tap and Spindle name files of this run's folder) and
        acpx queue owners (their HOME is this run's acpx home)."""
        mine = []
        markers = [str(self.wire_log).encode(), str(self.workdir / "sessions.db").encode()]
        home = f"HOME={self.home}".encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
                environ = (entry / "environ").read_bytes() if b"__queue-owner" in cmdline else b""
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state == "Z":
                continue
            if any(marker in cmdline for marker in markers) or home in environ.split(b"\0"):
                mine.append(int(entry.name))
        return mine

    def wait_idle(self, timeout: float = 15) -> None:
        """Waits until acpx's queue owner and its agent have exited."""
        deadline = time.monotonic() + timeout
        while self.our_processes():
            if time.monotonic() > deadline:
                raise FlowFailure(f"acpx's queue owner or agent still running after {timeout:.0f} s")
            time.sleep(0.1)

    def cleanup(self) -> None:
        for pid in self.our_processes():
            try:
                os.kill(pid, signal.SIGKILL)
                log(f"killed leftover process {pid}")
            except OSError:
                pass
        # acpx keeps its queue sockets in /tmp/acpx-<hash of HOME> (a fixed
        # /tmp, whatever TMPDIR says); this run's HOME makes it this run's.
        digest = hashlib.sha256(str(self.home).encode()).hexdigest()[:10]
        shutil.rmtree(f"/tmp/acpx-{digest}", ignore_errors=True)

    # --- reading what happened --------------------------------------------
    def wire(self) -> list[dict]:
        records = []
        for line in self.wire_log.read_text().splitlines():
            record = json.loads(line)
            if record["dir"] in ("in", "out"):
                try:
                    record["json"] = json.loads(record["msg"])
                except ValueError:
                    record["json"] = None
            else:
                record["json"] = json.loads(record["msg"])
            records.append(record)
        return records

    def mark(self) -> int:
        return len(self.wire())

    def since(self, mark: int) -> list[dict]:
        return self.wire()[mark:]

    @staticmethod
    def requests(records: list[dict], method: str, direction: str) -> list[dict]:
        return [r for r in records if r["dir"] == direction and r["json"] and r["json"].get("method") == method and "id" in r["json"]]

    @staticmethod
    def answer(records: list[dict], request: dict) -> dict:
        """The answer to a request, from the other direction of the same agent."""
        other = "out" if request["dir"] == "in" else "in"
        for record in records:
            message = record["json"]
            if (record["pid"] == request["pid"] and record["dir"] == other and message
                    and "method" not in message and message.get("id") == request["json"]["id"]):
                return message
        raise FlowFailure(f"{request['json']['method']} (id {request['json']['id']}) was never answered")

    @staticmethod
    def json_lines(text: str) -> list[dict]:
        messages = []
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    messages.append(json.loads(line))
                except ValueError:
                    pass
        return messages

    @staticmethod
    def updates(messages: list[dict]) -> list[dict]:
        return [m["params"]["update"] for m in messages if m.get("method") == "session/update"]

    @staticmethod
    def joined(updates: list[dict], kind: str) -> str:
        return "".join(u["content"].get("text", "") for u in updates if u.get("sessionUpdate") == kind)

    @staticmethod
    def stop_reason(messages: list[dict]) -> str | None:
        reasons = [m["result"]["stopReason"] for m in messages if isinstance(m.get("result"), dict) and "stopReason" in m["result"]]
        return reasons[-1] if reasons else None

    @staticmethod
    def tool_calls(updates: list[dict]) -> dict[str, dict]:
        calls: dict[str, dict] = {}
        for u in updates:
            if u.get("sessionUpdate") in ("tool_call", "tool_call_update"):
                call = calls.setdefault(u["toolCallId"], {"kind": None, "status": None})
                call["kind"] = u.get("kind") or call["kind"]
                call["status"] = u.get("status") or call["status"]
        return calls

    # --- flows --------------------------------------------------------------
    def flow_initialize(self) -> str:
        mark = self.mark()
        result = self.run("--format", "json", "sessions", "new", "--name", SESSION)
        self.wait_idle()
        self.new_output = result.stdout
        records = self.since(mark)
        self.new_records = records
        initialize = self.requests(records, "initialize", "in")
        check(initialize, "acpx sent no initialize")
        params = initialize[0]["json"]["params"]
        check(params.get("protocolVersion") == 1, f"acpx asked for protocol {params.get('protocolVersion')}")
        capabilities = params.get("clientCapabilities", {})
        check(capabilities.get("fs", {}).get("readTextFile") and capabilities.get("terminal"),
              f"acpx advertised {capabilities}")
        answer = self.answer(records, initialize[0])
        check(answer.get("result", {}).get("protocolVersion") == 1, f"initialize answer {answer}")
        client = params.get("clientInfo", {})
        return f"{client.get('name')} {client.get('version')} ↔ {answer['result'].get('agentInfo', {}).get('name')}"

    def flow_new_session(self) -> str:
        new = self.requests(self.new_records, "session/new", "in")
        check(new, "acpx sent no session/new")
        answer = self.answer(self.new_records, new[0])
        check("result" in answer, f"session/new answer {answer}")
        self.session_id = answer["result"]["sessionId"]
        check(self.session_id in self.new_output, f"acpx did not report the session: {self.new_output.strip()[:300]}")
        # acpx keeps the session under the name and finds it again by name.
        shown = self.run("--format", "json", "sessions", "show", SESSION)
        check(self.session_id in shown.stdout, f"sessions show: {shown.stdout.strip()[:300]}")
        return f"named session {SESSION!r} = {self.session_id}"

    def flow_stream(self) -> str:
        prompt = "interop: stream"
        result = self.run("--format", "json", "exec", prompt)
        self.wait_idle()
        messages = self.json_lines(result.stdout)
        updates = self.updates(messages)
        check(self.stop_reason(messages) == "end_turn", f"stopReason {self.stop_reason(messages)}")
        thought, text = self.joined(updates, "agent_thought_chunk"), self.joined(updates, "agent_message_chunk")
        check(thought == self.scenario.thought(prompt), f"thought {thought!r}")
        check(text == self.scenario.text(prompt), f"text {text!r}")
        chunks = sum(1 for u in updates if u["sessionUpdate"] == "agent_message_chunk")
        check(chunks > 1, "the text came in one chunk")
        quiet = self.run("--format", "quiet", "exec", prompt)
        self.wait_idle()
        check(quiet.stdout.strip() == self.scenario.text(prompt), f"--format quiet printed {quiet.stdout!r}")
        return f"exec: {chunks} text chunks, thought and text exact; --format quiet prints the answer"

    def flow_tools(self) -> str:
        prompt = "interop: tools"
        mark = self.mark()
        # Edits allowed, commands denied: acpx's own permission policy.
        result = self.run("--approve-all", "--permission-policy", json.dumps({"autoDeny": ["execute"]}),
                          "--format", "json", "prompt", "-s", SESSION, prompt)
        self.wait_idle()
        messages = self.json_lines(result.stdout)
        check(self.stop_reason(messages) == "end_turn", f"stopReason {self.stop_reason(messages)}")
        records = self.since(mark)
        self.tools_records = records
        asked = self.requests(records, "session/request_permission", "out")
        answers = []
        for request in asked:
            outcome = self.answer(records, request).get("result", {}).get("outcome", {})
            answers.append((request["json"]["params"]["toolCall"].get("kind"), outcome.get("optionId", outcome.get("outcome"))))
        check(answers == [("edit", "allow_once"), ("execute", "reject_once")], f"permission answers {answers}")
        calls = self.tool_calls(self.updates(messages))
        by_kind = {c["kind"]: c["status"] for c in calls.values()}
        check(by_kind == {"read": "completed", "edit": "completed", "execute": "failed"}, f"tool calls {by_kind}")
        notes = (self.workspace / "notes.txt").read_text()
        check(notes == "title: interop notes\nstatus: reviewed\n", f"notes.txt is {notes!r}")
        check(not (self.workspace / "rejected.txt").exists(), "the rejected command ran")
        text = self.joined(self.updates(messages), "agent_message_chunk")
        check(text == self.scenario.text(prompt), f"text {text!r}")
        return "edit allowed and applied, command denied by the policy and not run"

    def flow_editor_fs(self) -> str:
        records = self.tools_records
        done = []
        for method in ("fs/read_text_file", "fs/write_text_file"):
            requests = self.requests(records, method, "out")
            check(requests, f"the agent sent no {method}")
            for request in requests:
                answer = self.answer(records, request)
                check("result" in answer, f"acpx answered {method} with {answer}")
            done.append(f"{method}×{len(requests)}")
        return ", ".join(done) + " answered by acpx"

    def flow_terminal(self) -> str:
        prompt = "interop: terminal"
        mark = self.mark()
        result = self.run("--approve-all", "--format", "json", "prompt", "-s", SESSION, prompt)
        self.wait_idle()
        messages = self.json_lines(result.stdout)
        check(self.stop_reason(messages) == "end_turn", f"stopReason {self.stop_reason(messages)}")
        records = self.since(mark)
        methods = [r["json"]["method"] for r in records
                   if r["dir"] == "out" and r["json"] and str(r["json"].get("method", "")).startswith("terminal/")]
        check(methods and methods[0] == "terminal/create" and methods[-1] == "terminal/release"
              and "terminal/wait_for_exit" in methods and "terminal/output" in methods, f"terminal requests {methods}")
        for request in [r for r in records if r["dir"] == "out" and r["json"] and str(r["json"].get("method", "")).startswith("terminal/")]:
            answer = self.answer(records, request)
            check("result" in answer, f"acpx answered {request['json']['method']} with {answer}")
            if request["json"]["method"] == "terminal/output":
                output = answer["result"].get("output", "")
                check("terminal-ok" in output and "to-stderr" in output, f"terminal output {output!r}")
        calls = self.tool_calls(self.updates(messages))
        check([c["status"] for c in calls.values()] == ["completed"], f"tool calls {calls}")
        text = self.joined(self.updates(messages), "agent_message_chunk")
        check(text == self.scenario.text(prompt), f"text {text!r}")
        return "terminal requests " + ",".join(m.split("/")[1] for m in methods)

    def flow_cancel(self) -> str:
        prompt = "interop: slow"
        mark = self.mark()
        # A longer TTL keeps the same queue owner and agent for the follow-up.
        process, out = self.start("--format", "json", "prompt", "-s", SESSION, prompt, ttl=8)
        try:
            deadline = time.monotonic() + 15
            while '"agent_message_chunk"' not in out.read_text():
                check(process.poll() is None, "the slow prompt ended before it could be cancelled")
                check(time.monotonic() < deadline, "the slow stream did not start")
                time.sleep(0.05)
            cancelled_at = time.monotonic()
            cancel = self.run("cancel", "-s", SESSION, ttl=8)
            process.wait(timeout=15)
            elapsed = time.monotonic() - cancelled_at
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        messages = self.json_lines(out.read_text())
        check(self.stop_reason(messages) == "cancelled", f"stopReason {self.stop_reason(messages)}")
        check(process.returncode == 0, f"the cancelled prompt exited {process.returncode}")
        check(elapsed < 5, f"the cancel took {elapsed:.1f} s")
        partial = self.joined(self.updates(messages), "agent_message_chunk")
        full = self.scenario.text(prompt)
        check(full.startswith(partial) and partial != full, f"streamed {partial!r}")
        follow = "interop: after cancel"
        result = self.run("--format", "json", "prompt", "-s", SESSION, follow, ttl=8)
        follow_messages = self.json_lines(result.stdout)
        check(self.stop_reason(follow_messages) == "end_turn", f"follow-up stopReason {self.stop_reason(follow_messages)}")
        text = self.joined(self.updates(follow_messages), "agent_message_chunk")
        check(text == self.scenario.text(follow), f"follow-up text {text!r}")
        self.wait_idle(20)
        records = self.since(mark)
        cancels = [r for r in records if r["dir"] == "in" and r["json"] and r["json"].get("method") == "session/cancel"]
        check(cancels, "acpx sent no session/cancel")
        prompts = self.requests(records, "session/prompt", "in")
        same = len({r["pid"] for r in prompts}) == 1
        return (f"{cancel.stdout.strip()!r}; cancelled after {len(partial.split())} words in {elapsed:.1f} s; "
                f"follow-up answered by {'the same' if same else 'a new'} agent process")

    def flow_set_mode(self) -> str:
        mark = self.mark()
        result = self.run("set-mode", "plan", "-s", SESSION)
        self.wait_idle()
        check("plan" in result.stdout, f"set-mode printed {result.stdout!r}")
        records = self.since(mark)
        requests = self.requests(records, "session/set_mode", "in")
        check(requests and requests[-1]["json"]["params"]["modeId"] == "plan", "acpx sent no session/set_mode plan")
        check("result" in self.answer(records, requests[-1]), "session/set_mode failed")
        plan = self.run("--format", "json", "prompt", "-s", SESSION, "interop: plan")
        self.wait_idle()
        messages = self.json_lines(plan.stdout)
        check(self.stop_reason(messages) == "end_turn", f"plan prompt stopReason {self.stop_reason(messages)}")
        plans = [u for u in self.updates(messages) if u["sessionUpdate"] == "plan"]
        check(plans and len(plans[-1]["entries"]) == 2, f"plan updates {plans}")
        records = self.since(mark)
        modes = [r["json"]["params"]["update"].get("currentModeId") for r in records if r["dir"] == "out" and r["json"]
                 and r["json"].get("method") == "session/update" and r["json"]["params"]["update"]["sessionUpdate"] == "current_mode_update"]
        check(modes and modes[-1] == "plan", f"current_mode_update {modes}")
        result = self.run("set-mode", "normal", "-s", SESSION)
        self.wait_idle()
        check("normal" in result.stdout, f"set-mode printed {result.stdout!r}")
        return "set-mode plan (plan update with 2 entries), set-mode normal"

    def flow_config(self) -> str:
        done = []
        for key, value in [("tool_approval", "auto"), ("agent_preset", "delivery"), ("tool_approval", "ask")]:
            mark = self.mark()
            result = self.run("set", key, value, "-s", SESSION)
            self.wait_idle()
            check(f"{key}={value}" in result.stdout, f"set printed {result.stdout!r}")
            records = self.since(mark)
            requests = [r for r in self.requests(records, "session/set_config_option", "in")
                        if r["json"]["params"]["configId"] == key and r["json"]["params"]["value"] == value]
            check(requests, f"acpx sent no session/set_config_option {key}={value}")
            answer = self.answer(records, requests[-1])
            options = {o["id"]: o["currentValue"] for o in answer.get("result", {}).get("configOptions", [])}
            check(options.get(key) == value, f"{key} is {options.get(key)} in the answer")
            done.append(f"{key}={value}")
        mark = self.mark()
        result = self.run("--format", "json", "exec", "--config-option", "agent_preset=light", "interop: stream")
        self.wait_idle()
        check(self.stop_reason(self.json_lines(result.stdout)) == "end_turn", "exec with --config-option did not answer")
        requests = [r for r in self.requests(self.since(mark), "session/set_config_option", "in")
                    if r["json"]["params"]["configId"] == "agent_preset"]
        check(requests, "exec --config-option sent no session/set_config_option")
        return "set " + ", ".join(done) + "; exec --config-option agent_preset=light"

    def flow_list(self) -> str:
        mark = self.mark()
        result = self.run("--format", "json", "sessions", "list")
        self.wait_idle()
        listed = json.loads(result.stdout)
        check(listed.get("source") == "agent", f"acpx listed from {listed.get('source')}")
        sessions = {s["sessionId"]: s for s in listed.get("sessions", [])}
        check(self.session_id in sessions, f"{self.session_id} not in {list(sessions)}")
        # The named session's first prompt was the tools one (the stream
        # flow used `exec`), and a session is titled after its first prompt.
        title = sessions[self.session_id].get("title")
        check(title == "interop: tools", f"title {title!r}")
        records = self.since(mark)
        check(self.requests(records, "session/list", "in"), "acpx sent no session/list")
        return f"{len(sessions)} sessions listed by a new agent process, title {title!r}"

    def reconnect(self, prompt: str, method: str) -> tuple[list[dict], list[dict]]:
        """Prompts the named session from a new agent process; returns the
        wire records of that process and acpx's output messages."""
        self.wait_idle()
        mark = self.mark()
        known = {r["pid"] for r in self.wire()}
        result = self.run("--format", "json", "prompt", "-s", SESSION, prompt)
        self.wait_idle()
        records = self.since(mark)
        requests = self.requests(records, method, "in")
        check(requests, f"acpx sent no {method}: {[r['json'].get('method') for r in records if r['dir'] == 'in' and r['json']]}")
        check(requests[0]["pid"] not in known, "the session was not reopened by a new agent process")
        check(requests[0]["json"]["params"]["sessionId"] == self.session_id, f"{method} of another session")
        messages = self.json_lines(result.stdout)
        check(self.stop_reason(messages) == "end_turn", f"stopReason after {method} {self.stop_reason(messages)}")
        text = self.joined(self.updates(messages), "agent_message_chunk")
        check(text.endswith(self.scenario.text(prompt)), f"text after {method} {text!r}")
        return [r for r in records if r["pid"] == requests[0]["pid"]], messages

    def flow_resume(self) -> str:
        records, _ = self.reconnect("interop: after resume", "session/resume")
        request = self.requests(records, "session/resume", "in")[0]
        answer_at = next(i for i, r in enumerate(records) if r["dir"] == "out" and r["json"]
                         and r["json"].get("id") == request["json"]["id"] and "method" not in r["json"])
        before = [r for r in records[:answer_at] if r["dir"] == "out" and r["json"] and r["json"].get("method") == "session/update"]
        check(not before, f"{len(before)} updates before the resume answer")
        return "new agent process: session/resume without replay, then the prompt answered"

    def flow_load(self) -> str:
        self.hide_resume.touch()
        try:
            records, messages = self.reconnect("interop: after load", "session/load")
        finally:
            self.hide_resume.unlink()
        request = self.requests(records, "session/load", "in")[0]
        answer_at = next(i for i, r in enumerate(records) if r["dir"] == "out" and r["json"]
                         and r["json"].get("id") == request["json"]["id"] and "method" not in r["json"])
        replay = [r["json"]["params"]["update"] for r in records[:answer_at]
                  if r["dir"] == "out" and r["json"] and r["json"].get("method") == "session/update"]
        users = [u["content"]["text"] for u in replay if u["sessionUpdate"] == "user_message_chunk"]
        check("interop: tools" in users and "interop: after cancel" in users and "interop: after resume" in users,
              f"replayed user messages {users}")
        echoed = [u for u in self.updates(messages) if u.get("sessionUpdate") == "user_message_chunk"]
        return (f"new agent process (resume hidden by the tap): session/load replayed {len(replay)} updates "
                f"({len(users)} user messages) before its answer; acpx showed {len(echoed)} of them; prompt answered")

    def flow_exit(self) -> str:
        exits = [r["json"] for r in self.wire() if r["dir"] == "exit"]
        check(exits, "no agent process ended")
        clean = [e for e in exits if e["code"] == 0 and e["stdin_closed"] and not e["signals"]]
        signalled = [e for e in exits if e["signals"]]
        others = [e for e in exits if e not in clean and e not in signalled]
        check(not others, f"agents that ended badly: {others}")
        self.wait_idle()
        return f"{len(exits)} agent processes: {len(clean)} exited 0 after stdin closed, {len(signalled)} stopped by acpx with a signal"

    def main(self) -> None:
        try:
            r = self.report
            r.run("initialize", self.flow_initialize)
            r.run("new_session", self.flow_new_session, ("initialize",))
            r.run("stream", self.flow_stream, ("initialize",))
            r.run("tools_permissions", self.flow_tools, ("new_session",))
            r.run("editor_fs", self.flow_editor_fs, ("tools_permissions",))
            r.run("editor_terminal", self.flow_terminal, ("new_session",))
            r.run("cancel", self.flow_cancel, ("new_session",))
            r.run("set_mode", self.flow_set_mode, ("new_session",))
            r.run("set_config_option", self.flow_config, ("new_session",))
            r.run("session_list", self.flow_list, ("new_session",))
            r.run("session_resume", self.flow_resume, ("new_session",))
            r.run("session_load", self.flow_load, ("new_session",))
            r.run("agent_exit", self.flow_exit)
        finally:
            try:
                self.run("sessions", "close", SESSION, expect=None)
                self.wait_idle(10)
            except Exception as error:  # noqa: BLE001 - cleanup goes on
                log(f"closing the session: {error}")
            self.cleanup()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spindle", required=True)
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--acpx", required=True)
    args = parser.parse_args()
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    driver = Acpx(args)
    driver.main()
    for flow in FLOWS:
        if flow not in driver.report.outcomes:
            driver.report.emit("FAIL", flow, "the client did not run this flow")
    return 0


if __name__ == "__main__":
    sys.exit(main())
