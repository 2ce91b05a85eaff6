#!/usr/bin/env node
// A client of `spindle serve` on the official TypeScript SDK's remote
// transports (`@agentclientprotocol/sdk`): Streamable HTTP
// (`experimental/http-client`, `createHttpStream`) or WebSocket
// (`experimental/ws-client`, `createWebSocketStream`, on the `ws` package:
// Node 20 has no global WebSocket).
//
// It runs the scenario of remote_client.py on one transport: initialize; a
// new session; a prompt whose tools read and edit a file, the edit asked
// for and allowed; a slow prompt cancelled mid-way; then a second
// connection loads the session and must see the conversation replayed.
// Each check prints one line (`ok - …` or `not ok - …`), and the last line
// is `N passed, M failed`; the exit status is 1 when a check failed.
//
// Usage: node remote_client.mjs --url URL --token TOKEN --transport http|ws --workdir DIR --node-modules DIR

import { readFileSync, realpathSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

const TIMEOUT_MS = 30_000;
const SCENARIO_TIMEOUT_MS = 120_000;

const { values: args } = parseArgs({
  options: {
    url: { type: "string" },
    token: { type: "string" },
    transport: { type: "string" },
    workdir: { type: "string" },
    "node-modules": { type: "string" },
  },
});
for (const name of ["url", "token", "transport", "workdir", "node-modules"]) {
  if (!args[name]) {
    console.error(`missing --${name}`);
    process.exit(2);
  }
}
if (args.transport !== "http" && args.transport !== "ws") {
  console.error(`--transport is http or ws, not ${args.transport}`);
  process.exit(2);
}

// The SDK, its two client transports and `ws`, from the deps folder.
const requireFromDeps = createRequire(join(resolve(args["node-modules"]), "resolve-from-here.js"));
const load = async (name) => await import(pathToFileURL(requireFromDeps.resolve(name)).href);
const acp = await load("@agentclientprotocol/sdk");
const { createHttpStream } = await load("@agentclientprotocol/sdk/experimental/http-client");
const { createWebSocketStream } = await load("@agentclientprotocol/sdk/experimental/ws-client");
const wsModule = await load("ws");
const WebSocket = wsModule.WebSocket ?? wsModule.default;

// --- checks -----------------------------------------------------------------

const counts = { passed: 0, failed: 0 };
function check(name, ok, detail = "") {
  if (ok) {
    counts.passed += 1;
    process.stdout.write(`ok - ${name}\n`);
  } else {
    counts.failed += 1;
    process.stdout.write(`not ok - ${name} ${String(detail).split(/\s+/).join(" ")}\n`);
  }
}

const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

function within(ms, promise, what) {
  let timer;
  const timeout = new Promise((_, fail) => {
    timer = setTimeout(() => fail(new Error(`${what}: no answer in ${ms / 1000} s`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// --- the client side --------------------------------------------------------

/** Records updates, allows edits, nothing else. */
class Editor {
  constructor() {
    this.updates = [];
    this.permissions = [];
  }

  app() {
    return acp
      .client({ name: "spindle-remote-typescript" })
      .onNotification("session/update", ({ params }) => {
        this.updates.push(params);
      })
      .onRequest("session/request_permission", ({ params }) => {
        this.permissions.push(params.toolCall.title ?? "");
        const option = params.options.find((o) => o.kind === "allow_once");
        if (!option) return { outcome: { outcome: "cancelled" } };
        return { outcome: { outcome: "selected", optionId: option.optionId } };
      });
  }

  texts(sessionId) {
    return this.updates
      .filter((u) => u.sessionId === sessionId)
      .map((u) => u.update?.content)
      .filter((c) => c && typeof c.text === "string")
      .map((c) => c.text)
      .join("");
  }
}

function openStream() {
  const headers = { Authorization: `Bearer ${args.token}` };
  if (args.transport === "http") return createHttpStream(args.url, { headers });
  const url = args.url.replace(/^http:\/\//, "ws://").replace(/^https:\/\//, "wss://");
  return createWebSocketStream(url, { headers, WebSocket });
}

async function initialize(ctx) {
  return await within(
    TIMEOUT_MS,
    ctx.request("initialize", {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: {},
      clientInfo: { name: "spindle-remote-typescript", version: "1.0.0" },
    }),
    "initialize",
  );
}

const prompt = (ctx, sessionId, text) =>
  ctx.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });

async function scenario() {
  const workdir = realpathSync(resolve(args.workdir));
  const editor = new Editor();
  let session;
  await editor.app().connectWith(openStream(), async (ctx) => {
    const init = await initialize(ctx);
    check("initialize answers with protocol version 1", init.protocolVersion === 1, init.protocolVersion);
    check("the agent can load sessions", init.agentCapabilities?.loadSession === true);

    const created = await within(TIMEOUT_MS, ctx.request("session/new", { cwd: workdir, mcpServers: [] }), "session/new");
    session = created.sessionId;
    check("session/new gives a session id", typeof session === "string" && session.length > 0);

    const answer = await within(TIMEOUT_MS, prompt(ctx, session, "remote: tools"), "the tools prompt");
    check("the tools prompt ends its turn", answer.stopReason === "end_turn", answer.stopReason);
    check("the edit was asked for and allowed", editor.permissions.length >= 1, JSON.stringify(editor.permissions));
    const notes = readFileSync(join(workdir, "notes.txt"), "utf8");
    check("the allowed edit landed", notes.includes("status: reviewed"), notes);
    const toolCalls = editor.updates.filter((u) => u.sessionId === session && u.update?.sessionUpdate === "tool_call");
    check("tool calls streamed on the session's stream", toolCalls.length >= 2, toolCalls.length);
    check("the answer text streamed", editor.texts(session).includes("reviewed"));

    const slow = prompt(ctx, session, "remote: slow");
    slow.catch(() => {});
    for (let i = 0; i < 200; i += 1) {
      if (editor.texts(session).split("reviewed").at(-1).includes("two")) break;
      await sleep(50);
    }
    await ctx.notify("session/cancel", { sessionId: session });
    const cancelled = await within(TIMEOUT_MS, slow, "the slow prompt");
    check("cancel ends the slow prompt as cancelled", cancelled.stopReason === "cancelled", cancelled.stopReason);
  });

  // A second connection loads the session: the conversation is replayed.
  const second = new Editor();
  await second.app().connectWith(openStream(), async (ctx) => {
    await initialize(ctx);
    await within(
      TIMEOUT_MS,
      ctx.request("session/load", { sessionId: session, cwd: workdir, mcpServers: [] }),
      "session/load",
    );
    const replayed = second.texts(session);
    check(
      "a second connection loads the session and sees it replayed",
      replayed.includes("remote: tools") && replayed.includes("reviewed"),
      replayed.slice(0, 200),
    );
    const after = await within(TIMEOUT_MS, prompt(ctx, session, "remote: after"), "the prompt after load");
    check("the loaded session takes a new prompt", after.stopReason === "end_turn", after.stopReason);
  });
}

try {
  await within(SCENARIO_TIMEOUT_MS, scenario(), "the scenario");
} catch (error) {
  check("the scenario ran to its end", false, `${error?.name ?? "Error"}: ${error?.message ?? error}`);
}
process.stdout.write(`${counts.passed} passed, ${counts.failed} failed\n`);
process.exit(counts.failed === 0 ? 0 : 1);
