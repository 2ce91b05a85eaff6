#!/usr/bin/env python3
"""A client of `spindle serve` on the official Python SDK's remote
transports (`agent-client-protocol[http]`): Streamable HTTP
(`create_http_stream`) or WebSocket (`create_websocket_stream`).

It runs one whole scenario on one transport: initialize; a new session; a
prompt whose tools read and edit a file, the edit asked for and allowed; a
slow prompt cancelled mid-way; then a second connection loads the session
and must see the conversation replayed. Every message the agent sends is
validated against the SDK's own models on the way in (the SDK does this
when it decodes); each check prints one line, and the last line is
`N passed, N failed`.

Usage: remote_client.py --url URL --token TOKEN --transport http|ws --workdir DIR [--ca FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import sys
from pathlib import Path

import httpx
from acp import PROTOCOL_VERSION, connect_to_agent, text_block
from acp import schema as S
from acp.http.client import create_http_stream
from acp.ws.client import create_websocket_stream

TIMEOUT = 30.0


class Editor:
    """The client side: records updates, allows edits, nothing else."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, object]] = []
        self.permissions: list[str] = []

    async def session_update(self, session_id, update, **kwargs):
        self.updates.append((session_id, update))

    async def request_permission(self, options, session_id, tool_call, **kwargs):
        self.permissions.append(tool_call.title or "")
        option = next((o for o in options if o.kind == "allow_once"), None)
        if option is None:
            return S.RequestPermissionResponse(outcome=S.DeniedOutcome(outcome="cancelled"))
        return S.RequestPermissionResponse(
            outcome=S.AllowedOutcome(outcome="selected", option_id=option.option_id)
        )

    def texts(self, session_id: str) -> str:
        out = []
        for sid, update in self.updates:
            if sid != session_id:
                continue
            content = getattr(update, "content", None)
            text = getattr(content, "text", None)
            if isinstance(text, str):
                out.append(text)
        return "".join(out)


class Checks:
    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0

    def check(self, name: str, ok: bool, detail: str = "") -> None:
        if ok:
            self.passed += 1
            print(f"ok - {name}", flush=True)
        else:
            self.failed += 1
            print(f"not ok - {name} {detail}", flush=True)


async def open_transport(args):
    headers = {"Authorization": f"Bearer {args.token}"}
    if args.transport == "http":
        client = None
        if args.ca:
            # The SDK's own client, as it makes it, trusting the test CA.
            client = httpx.AsyncClient(
                http2=True, timeout=httpx.Timeout(None), verify=ssl.create_default_context(cafile=args.ca)
            )
        return create_http_stream(args.url, headers=headers, client=client)
    url = args.url.replace("http://", "ws://").replace("https://", "wss://")
    # A wss:// connection trusts what SSL_CERT_FILE names (set by the test).
    return await create_websocket_stream(url, headers=headers)


async def connect(args, editor):
    transport = await open_transport(args)
    conn = connect_to_agent(editor, transport)
    init = await asyncio.wait_for(
        conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=S.ClientCapabilities()),
        TIMEOUT,
    )
    return conn, transport, init


async def scenario(args, checks: Checks) -> None:
    workdir = str(Path(args.workdir).resolve())
    editor = Editor()
    conn, transport, init = await connect(args, editor)
    checks.check("initialize answers with protocol version 1", init.protocol_version == 1)
    checks.check("the agent can load sessions", bool(init.agent_capabilities.load_session))

    new = await asyncio.wait_for(conn.new_session(cwd=workdir, mcp_servers=[]), TIMEOUT)
    session = new.session_id
    checks.check("session/new gives a session id", bool(session))

    answer = await asyncio.wait_for(
        conn.prompt(session_id=session, prompt=[text_block("remote: tools")]), TIMEOUT
    )
    checks.check("the tools prompt ends its turn", answer.stop_reason == "end_turn", answer.stop_reason)
    checks.check("the edit was asked for and allowed", len(editor.permissions) >= 1, str(editor.permissions))
    notes = (Path(workdir) / "notes.txt").read_text()
    checks.check("the allowed edit landed", "status: reviewed" in notes, notes)
    tool_calls = [u for s, u in editor.updates if s == session and isinstance(u, S.ToolCallStart)]
    checks.check("tool calls streamed on the session's stream", len(tool_calls) >= 2, str(len(tool_calls)))
    checks.check("the answer text streamed", "reviewed" in editor.texts(session))

    slow = asyncio.ensure_future(conn.prompt(session_id=session, prompt=[text_block("remote: slow")]))
    for _ in range(200):
        if "two" in editor.texts(session).split("reviewed")[-1]:
            break
        await asyncio.sleep(0.05)
    await conn.cancel(session_id=session)
    cancelled = await asyncio.wait_for(slow, TIMEOUT)
    checks.check("cancel ends the slow prompt as cancelled", cancelled.stop_reason == "cancelled", cancelled.stop_reason)

    await transport.close()

    # A second connection loads the session: the conversation is replayed.
    second = Editor()
    conn2, transport2, _ = await connect(args, second)
    await asyncio.wait_for(
        conn2.load_session(session_id=session, cwd=workdir, mcp_servers=[]), TIMEOUT
    )
    replayed = second.texts(session)
    checks.check("a second connection loads the session and sees it replayed", "remote: tools" in replayed and "reviewed" in replayed, replayed[:200])
    after = await asyncio.wait_for(
        conn2.prompt(session_id=session, prompt=[text_block("remote: after")]), TIMEOUT
    )
    checks.check("the loaded session takes a new prompt", after.stop_reason == "end_turn", after.stop_reason)
    await transport2.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--transport", choices=["http", "ws"], required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--ca", help="a CA file to trust (https:// and wss://)")
    args = parser.parse_args()
    checks = Checks()
    try:
        asyncio.run(asyncio.wait_for(scenario(args, checks), 120))
    except Exception as error:  # noqa: BLE001 - any failure is a failed check
        checks.check("the scenario ran to its end", False, f"{type(error).__name__}: {error}")
    print(f"{checks.passed} passed, {checks.failed} failed", flush=True)
    return 0 if checks.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
