#!/usr/bin/env python3
"""A wire tap between acpx and Spindle.

acpx starts this program as its agent; it starts Spindle and copies the
lines both ways unchanged, writing each one, and the agent's exit, to a log
(one JSON object a line: {"pid", "dir": "in"|"out"|"exit", "msg"}). The acpx
driver reads the log to see which ACP messages acpx sent and how it
answered the agent's requests.

With `--hide-resume-if FILE`, when FILE exists at start-up, the tap removes
`sessionCapabilities.resume` from the `initialize` answer, so that acpx,
which prefers session/resume, takes its session/load path instead. Nothing
else is ever changed.

Usage: tap.py --log FILE [--hide-resume-if FILE] -- AGENT ARGS...
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading


def main() -> int:
    argv = sys.argv[1:]
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1 :]
    log_path = options[options.index("--log") + 1]
    hide_resume = False
    if "--hide-resume-if" in options:
        hide_resume = os.path.exists(options[options.index("--hide-resume-if") + 1])

    log = open(log_path, "a", buffering=1)  # noqa: SIM115 - open for the whole run
    lock = threading.Lock()

    def record(direction: str, message: str) -> None:
        with lock:
            log.write(json.dumps({"pid": os.getpid(), "dir": direction, "msg": message}) + "\n")

    agent = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    stdin_closed = threading.Event()
    initialize_ids: set = set()

    def forward_stdin() -> None:
        for line in sys.stdin.buffer:
            text = line.decode("utf-8", "replace").rstrip("\n")
            record("in", text)
            if hide_resume:
                try:
                    message = json.loads(text)
                    if message.get("method") == "initialize":
                        initialize_ids.add(json.dumps(message.get("id")))
                except ValueError:
                    pass
            try:
                agent.stdin.write(line)
                agent.stdin.flush()
            except (BrokenPipeError, ValueError):
                break
        stdin_closed.set()
        try:
            agent.stdin.close()
        except (BrokenPipeError, ValueError):
            pass

    threading.Thread(target=forward_stdin, daemon=True).start()

    signalled = []

    def on_signal(number, _frame) -> None:
        signalled.append(signal.Signals(number).name)
        agent.send_signal(number)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    for line in agent.stdout:
        text = line.decode("utf-8", "replace").rstrip("\n")
        if hide_resume:
            try:
                message = json.loads(text)
                if json.dumps(message.get("id")) in initialize_ids and "result" in message:
                    capabilities = message["result"].get("agentCapabilities", {})
                    capabilities.get("sessionCapabilities", {}).pop("resume", None)
                    text = json.dumps(message, separators=(",", ":"))
                    line = (text + "\n").encode()
            except (ValueError, AttributeError):
                pass
        record("out", text)
        try:
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            break
    code = agent.wait()
    record(
        "exit",
        json.dumps({"code": code, "stdin_closed": stdin_closed.is_set(), "signals": signalled}),
    )
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
