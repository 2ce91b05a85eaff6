"""What the Python interop clients share: result lines, flows, the scenario
and the workspace. Standard library only, so the acpx driver can use it too.

A client prints one line per flow on stdout,

    RESULT<TAB>PASS|FAIL|SKIP<TAB>flow<TAB>detail

as soon as the flow ends, so `scripts/interop` still sees the flows that
finished when a client dies or hangs. Everything else goes to stderr.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

# The flows every client runs, in order. scripts/interop reports a flow a
# client never reported as failed.
FLOWS = [
    "initialize",
    "new_session",
    "stream",
    "tools_permissions",
    "editor_fs",
    "editor_terminal",
    "cancel",
    "set_mode",
    "set_config_option",
    "session_list",
    "session_load",
    "session_resume",
    "agent_exit",
]

# The file the tools flow reads and edits.
NOTES = "title: interop notes\nstatus: draft\n"

# The prompts sent to the agent in the first process, in order; a load must
# replay them as user messages.
FIRST_PROCESS_PROMPTS = [
    "interop: stream",
    "interop: tools",
    "interop: terminal",
    "interop: slow",
    "interop: after cancel",
]


class FlowFailure(Exception):
    """A check of a flow did not hold."""


class FlowSkipped(Exception):
    """The client cannot run this flow; the message says why."""


def check(condition: object, message: str) -> None:
    if not condition:
        raise FlowFailure(message)


def log(*parts: object) -> None:
    print(*parts, file=sys.stderr, flush=True)


class Report:
    """Prints result lines and remembers the outcome of each flow."""

    def __init__(self, client: str) -> None:
        self.client = client
        self.outcomes: dict[str, str] = {}

    def emit(self, status: str, flow: str, detail: str = "") -> None:
        self.outcomes[flow] = status
        detail = " ".join(str(detail).split())
        if len(detail) > 600:
            detail = detail[:600] + "…"
        print(f"RESULT\t{status}\t{flow}\t{detail}", flush=True)
        log(f"[{self.client}] {status} {flow} {detail}")

    def passed(self, flow: str) -> bool:
        return self.outcomes.get(flow) == "PASS"

    def blocked_by(self, requires: tuple[str, ...]) -> str | None:
        for flow in requires:
            if not self.passed(flow):
                return flow
        return None

    def outcome(self, flow: str, error: BaseException | None, detail: str | None) -> None:
        if error is None:
            self.emit("PASS", flow, detail or "")
        elif isinstance(error, FlowSkipped):
            self.emit("SKIP", flow, str(error))
        elif isinstance(error, FlowFailure):
            self.emit("FAIL", flow, str(error))
        else:
            log("".join(traceback.format_exception(error)))
            self.emit("FAIL", flow, f"{type(error).__name__}: {error}")

    def run(self, flow: str, body, requires: tuple[str, ...] = ()) -> None:
        """Runs a synchronous flow body; its return value is the detail."""
        blocker = self.blocked_by(requires)
        if blocker:
            self.emit("FAIL", flow, f"not run: {blocker} did not pass")
            return
        try:
            detail = body()
        except Exception as error:  # noqa: BLE001 - every failure is a result
            self.outcome(flow, error, None)
            return
        self.outcome(flow, None, detail)


class Scenario:
    """The scripted scenario, read to know what each prompt must produce."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.data = json.loads(self.path.read_text())

    def _rule(self, prompt: str) -> dict:
        for rule in self.data.get("rules", []):
            prefix = rule.get("when", {}).get("starts_with")
            if prefix and prompt.lstrip().lower().startswith(prefix.lower()):
                return rule
        raise KeyError(f"no rule of {self.path.name} starts {prompt!r}")

    def _replies(self, prompt: str) -> list[dict]:
        rule = self._rule(prompt)
        return rule["replies"] if "replies" in rule else [rule["reply"]]

    def text(self, prompt: str) -> str:
        """Every answer text of the prompt's turn, joined."""
        return "".join(reply.get("text", "") for reply in self._replies(prompt))

    def thought(self, prompt: str) -> str:
        return "".join(reply.get("thought", "") for reply in self._replies(prompt))

    def texts(self, prompt: str) -> list[str]:
        return [reply["text"] for reply in self._replies(prompt) if reply.get("text")]


def prepare_workspace(path: str | Path) -> Path:
    workspace = Path(path)
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "notes.txt").write_text(NOTES)
    return workspace.resolve()


def spindle_args(scenario: str | Path, db: str | Path) -> list[str]:
    """The agent's arguments: the scripted model, a database shared by the
    agent processes of one client, every edit and command asking, and a
    declined call letting the turn go on (the scenario's closing text
    follows the declined command; stopping is covered by the agent's own
    tests)."""
    return ["acp", "--script", str(scenario), "--db", str(db), "--permissions", "ask", "--on-reject", "continue"]
