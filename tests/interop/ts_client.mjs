#!/usr/bin/env node
// A small ACP client on the official TypeScript SDK
// (`@agentclientprotocol/sdk`) that drives Spindle through the interop flows.
//
// It is plain JavaScript (ES modules) so that Node runs it as it is, with no
// compile step; it uses the SDK's client app (`client()`, `onRequest`,
// `onNotification`, `connectWith`) and `ndJsonStream`.
//
// It advertises the editor's file system and terminal and implements them
// (reads come from an "editor buffer" when one is open), answers permission
// requests by tool kind, and validates every message the agent sends with
// the SDK's own generated zod schemas (`dist/v1/schema/zod.gen.js`; the
// package does not list that file in its exports, so it is imported by
// path next to the SDK's entry point). An invalid message, an error answer,
// an error the SDK reports or a handler that throws fails the flow that was
// running.
//
// Usage: node ts_client.mjs --spindle BIN --scenario FILE --workdir DIR --node-modules DIR
//
// Output: one `RESULT<TAB>PASS|FAIL|SKIP<TAB>flow<TAB>detail` line per flow
// on stdout (see common.py); logs on stderr.

import { spawn } from "node:child_process";
import { mkdirSync, openSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

const CLIENT = "typescript-sdk";
const FLOW_TIMEOUT_MS = 30_000;
const WAIT_TIMEOUT_MS = 10_000;

const FLOWS = [
  "initialize", "new_session", "stream", "tools_permissions", "editor_fs",
  "editor_terminal", "cancel", "set_mode", "set_config_option",
  "session_list", "session_load", "session_resume", "agent_exit",
];
const NOTES = "title: interop notes\nstatus: draft\n";
const FIRST_PROCESS_PROMPTS = [
  "interop: stream", "interop: tools", "interop: terminal", "interop: slow", "interop: after cancel",
];

const { values: args } = parseArgs({
  options: {
    spindle: { type: "string" },
    scenario: { type: "string" },
    workdir: { type: "string" },
    "node-modules": { type: "string" },
  },
});
for (const name of ["spindle", "scenario", "workdir", "node-modules"]) {
  if (!args[name]) {
    console.error(`missing --${name}`);
    process.exit(2);
  }
}

// The SDK and its zod schemas, from the deps folder.
const requireFromDeps = createRequire(join(resolve(args["node-modules"]), "resolve-from-here.js"));
const sdkEntry = requireFromDeps.resolve("@agentclientprotocol/sdk");
const acp = await import(pathToFileURL(sdkEntry).href);
const z = await import(pathToFileURL(join(dirname(sdkEntry), "..", "schema", "zod.gen.js")).href);

const RESPONSE_SCHEMAS = {
  initialize: z.zInitializeResponse,
  "session/new": z.zNewSessionResponse,
  "session/load": z.zLoadSessionResponse,
  "session/list": z.zListSessionsResponse,
  "session/resume": z.zResumeSessionResponse,
  "session/set_mode": z.zSetSessionModeResponse,
  "session/set_config_option": z.zSetSessionConfigOptionResponse,
  "session/prompt": z.zPromptResponse,
};
const REQUEST_SCHEMAS = {
  "session/request_permission": z.zRequestPermissionRequest,
  "fs/read_text_file": z.zReadTextFileRequest,
  "fs/write_text_file": z.zWriteTextFileRequest,
  "terminal/create": z.zCreateTerminalRequest,
  "terminal/output": z.zTerminalOutputRequest,
  "terminal/wait_for_exit": z.zWaitForTerminalExitRequest,
  "terminal/kill": z.zKillTerminalRequest,
  "terminal/release": z.zReleaseTerminalRequest,
};
const NOTIFICATION_SCHEMAS = { "session/update": z.zSessionNotification };
for (const [name, schema] of Object.entries({ ...RESPONSE_SCHEMAS, ...REQUEST_SCHEMAS, ...NOTIFICATION_SCHEMAS })) {
  if (!schema) throw new Error(`the SDK has no zod schema for ${name}`);
}

// --- results --------------------------------------------------------------

class FlowFailure extends Error {}

function check(condition, message) {
  if (!condition) throw new FlowFailure(message);
}

const outcomes = new Map();
function emit(status, flow, detail = "") {
  outcomes.set(flow, status);
  let text = String(detail).split(/\s+/).join(" ").trim();
  if (text.length > 600) text = `${text.slice(0, 600)}…`;
  process.stdout.write(`RESULT\t${status}\t${flow}\t${text}\n`);
  console.error(`[${CLIENT}] ${status} ${flow} ${text}`);
}

// --- the wire -------------------------------------------------------------

const wire = {
  incoming: [],
  ourRequests: new Map(),
  agentRequests: new Map(),
  violations: [],
  validated: 0,
  onIncoming(message) {
    this.incoming.push(message);
    const violation = this.validate(message);
    if (violation) this.violations.push(violation);
  },
  onOutgoing(message) {
    if ("method" in message && "id" in message) {
      this.ourRequests.set(message.id, message.method);
    } else if ("error" in message) {
      const method = this.agentRequests.get(message.id) ?? "?";
      this.violations.push(`our ${method} handler answered with an error: ${JSON.stringify(message.error)}`);
    }
  },
  validate(message) {
    let schema;
    let payload;
    let what;
    if ("method" in message && "id" in message) {
      this.agentRequests.set(message.id, message.method);
      schema = REQUEST_SCHEMAS[message.method];
      if (!schema) return `unexpected request from the agent: ${message.method}`;
      payload = message.params;
      what = message.method;
    } else if ("method" in message && String(message.method).startsWith("_")) {
      // This client never asks for Spindle's notifications in `initialize`,
      // so none may come (a vendor notification is what other clients
      // print as an error).
      return `a vendor notification nobody asked for: ${message.method}`;
    } else if ("method" in message) {
      schema = NOTIFICATION_SCHEMAS[message.method];
      if (!schema) return `unexpected notification from the agent: ${message.method}`;
      payload = message.params;
      what = message.method;
    } else {
      const method = this.ourRequests.get(message.id) ?? "?";
      if ("error" in message) return `the agent answered ${method} with an error: ${JSON.stringify(message.error)}`;
      schema = RESPONSE_SCHEMAS[method];
      if (!schema) return null;
      payload = message.result ?? {};
      what = `the ${method} answer`;
    }
    const parsed = schema.safeParse(payload);
    this.validated += 1;
    if (!parsed.success) {
      return `${what} does not match the SDK schema: ${parsed.error.message.slice(0, 400)} in ${JSON.stringify(message).slice(0, 300)}`;
    }
    return null;
  },
};

// Errors the SDK reports on the console (a message it could not parse, a
// handler that threw) are violations too.
const consoleError = console.error.bind(console);
console.error = (...parts) => {
  const text = parts
    .map((p) => (p instanceof Error ? p.message : typeof p === "object" ? JSON.stringify(p) : String(p)))
    .join(" ");
  if (!text.startsWith(`[${CLIENT}]`)) wire.violations.push(`the SDK reported an error: ${text.slice(0, 300)}`);
  consoleError(...parts);
};
const log = (...parts) => consoleError(`[${CLIENT}]`, ...parts);

// --- the editor -------------------------------------------------------------

class Editor {
  constructor() {
    this.updates = [];
    this.toolKinds = new Map();
    this.permissionAnswers = {};
    this.permissionLog = [];
    this.fsLog = [];
    this.buffers = new Map();
    this.terminals = new Map();
    this.terminalLog = [];
    this.nextTerminal = 0;
  }

  updatesOf(sessionId, start = 0) {
    return this.updates.slice(start).filter((u) => u.sessionId === sessionId).map((u) => u.update);
  }

  app() {
    return acp
      .client({ name: "spindle-interop-typescript" })
      .onNotification("session/update", ({ params }) => {
        this.updates.push(params);
        const update = params.update;
        if (update.sessionUpdate === "tool_call" && update.kind) this.toolKinds.set(update.toolCallId, update.kind);
      })
      .onRequest("session/request_permission", ({ params }) => {
        const kind = params.toolCall.kind ?? this.toolKinds.get(params.toolCall.toolCallId);
        const wanted = this.permissionAnswers[kind] ?? "reject_once";
        this.permissionLog.push({ kind, title: params.toolCall.title, answer: wanted });
        const option = params.options.find((o) => o.kind === wanted);
        if (!option) return { outcome: { outcome: "cancelled" } };
        return { outcome: { outcome: "selected", optionId: option.optionId } };
      })
      .onRequest("fs/read_text_file", ({ params }) => {
        this.fsLog.push(["read", params.path]);
        let text = this.buffers.has(params.path) ? this.buffers.get(params.path) : readFileSync(params.path, "utf8");
        if (params.line != null || params.limit != null) {
          const lines = text.split(/(?<=\n)/);
          const first = (params.line ?? 1) - 1;
          text = lines.slice(first, params.limit != null ? first + params.limit : undefined).join("");
        }
        return { content: text };
      })
      .onRequest("fs/write_text_file", ({ params }) => {
        this.fsLog.push(["write", params.path]);
        mkdirSync(dirname(params.path), { recursive: true });
        writeFileSync(params.path, params.content);
        if (this.buffers.has(params.path)) this.buffers.set(params.path, params.content);
        return {};
      })
      .onRequest("terminal/create", ({ params }) => {
        const env = { ...process.env };
        for (const variable of params.env ?? []) env[variable.name] = variable.value;
        const child = spawn(params.command, params.args ?? [], {
          cwd: params.cwd ?? undefined,
          env,
          stdio: ["ignore", "pipe", "pipe"],
        });
        const terminal = { child, output: Buffer.alloc(0), truncated: false, exit: null, limit: params.outputByteLimit };
        const append = (chunk) => {
          terminal.output = Buffer.concat([terminal.output, chunk]);
          if (terminal.limit != null && terminal.output.length > terminal.limit) {
            let cut = terminal.output.length - terminal.limit;
            while (cut < terminal.output.length && (terminal.output[cut] & 0xc0) === 0x80) cut += 1;
            terminal.output = terminal.output.subarray(cut);
            terminal.truncated = true;
          }
        };
        child.stdout.on("data", append);
        child.stderr.on("data", append);
        terminal.exited = new Promise((done) => {
          child.on("close", (code, signal) => {
            terminal.exit = { exitCode: code, signal: signal ?? null };
            done(terminal.exit);
          });
          child.on("error", (error) => {
            append(Buffer.from(String(error)));
            terminal.exit = { exitCode: 127, signal: null };
            done(terminal.exit);
          });
        });
        this.nextTerminal += 1;
        const terminalId = `term-${this.nextTerminal}`;
        this.terminals.set(terminalId, terminal);
        this.terminalLog.push(["create", terminalId]);
        return { terminalId };
      })
      .onRequest("terminal/output", ({ params }) => {
        this.terminalLog.push(["output", params.terminalId]);
        const terminal = this.terminal(params.terminalId);
        return {
          output: terminal.output.toString("utf8"),
          truncated: terminal.truncated,
          ...(terminal.exit ? { exitStatus: terminal.exit } : {}),
        };
      })
      .onRequest("terminal/wait_for_exit", async ({ params }) => {
        this.terminalLog.push(["wait_for_exit", params.terminalId]);
        return await this.terminal(params.terminalId).exited;
      })
      .onRequest("terminal/kill", ({ params }) => {
        this.terminalLog.push(["kill", params.terminalId]);
        const terminal = this.terminal(params.terminalId);
        if (!terminal.exit) terminal.child.kill("SIGKILL");
        return {};
      })
      .onRequest("terminal/release", async ({ params }) => {
        this.terminalLog.push(["release", params.terminalId]);
        const terminal = this.terminals.get(params.terminalId);
        this.terminals.delete(params.terminalId);
        if (terminal && !terminal.exit) {
          terminal.child.kill("SIGKILL");
          await terminal.exited;
        }
        return {};
      });
  }

  terminal(terminalId) {
    const terminal = this.terminals.get(terminalId);
    if (!terminal) throw new acp.RequestError(-32002, `no terminal ${terminalId}`);
    return terminal;
  }

  async close() {
    for (const terminal of this.terminals.values()) {
      if (!terminal.exit) {
        terminal.child.kill("SIGKILL");
        await terminal.exited;
      }
    }
    this.terminals.clear();
  }
}

// --- helpers ----------------------------------------------------------------

const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

async function waitUntil(predicate, what, timeout = WAIT_TIMEOUT_MS) {
  const deadline = Date.now() + timeout;
  while (!predicate()) {
    if (Date.now() > deadline) throw new FlowFailure(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, fail) => {
      timer = setTimeout(() => fail(new FlowFailure(`${what} did not finish within ${ms / 1000} s`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

function joined(updates, kind) {
  return updates
    .filter((u) => u.sessionUpdate === kind && u.content?.type === "text")
    .map((u) => u.content.text)
    .join("");
}

function finalStatuses(updates) {
  const calls = new Map();
  for (const u of updates) {
    if (u.sessionUpdate !== "tool_call" && u.sessionUpdate !== "tool_call_update") continue;
    const call = calls.get(u.toolCallId) ?? { kind: null, status: null, content: [] };
    if (u.kind) call.kind = u.kind;
    if (u.status) call.status = u.status;
    if (u.content) call.content = u.content;
    calls.set(u.toolCallId, call);
  }
  return calls;
}

function loadScenario(path) {
  const data = JSON.parse(readFileSync(path, "utf8"));
  const replies = (prompt) => {
    const rule = data.rules.find((r) => r.when?.starts_with && prompt.trimStart().toLowerCase().startsWith(r.when.starts_with.toLowerCase()));
    if (!rule) throw new Error(`no rule starts ${prompt}`);
    return rule.replies ?? [rule.reply];
  };
  return {
    text: (prompt) => replies(prompt).map((r) => r.text ?? "").join(""),
    thought: (prompt) => replies(prompt).map((r) => r.thought ?? "").join(""),
  };
}

function currentValue(answer, configId) {
  const option = answer.configOptions.find((o) => o.id === configId);
  if (!option) throw new FlowFailure(`${configId} missing from the answer`);
  return option.currentValue;
}

// --- the run ----------------------------------------------------------------

const workdir = resolve(args.workdir);
mkdirSync(workdir, { recursive: true });
const workspace = join(workdir, "workspace");
mkdirSync(workspace, { recursive: true });
writeFileSync(join(workspace, "notes.txt"), NOTES);
const scenarioPath = resolve(args.scenario);
const scenario = loadScenario(scenarioPath);
const db = join(workdir, "sessions.db");
const exitCodes = [];
let agents = 0;
const state = { sessionId: null, secondSession: null, toolsFs: [] };

async function flow(name, body, requires = []) {
  const blocker = requires.find((r) => outcomes.get(r) !== "PASS");
  if (blocker) {
    emit("FAIL", name, `not run: ${blocker} did not pass`);
    return;
  }
  const before = wire.violations.length;
  let error = null;
  let detail = "";
  try {
    detail = await withTimeout(Promise.resolve().then(body), FLOW_TIMEOUT_MS, "the flow");
  } catch (caught) {
    error = caught;
    if (!(caught instanceof FlowFailure)) log(caught?.stack ?? caught);
  }
  await sleep(50);
  const violations = wire.violations.slice(before);
  if (violations.length) {
    // A message the client could not take is the cause; what went wrong
    // next (often a wait that timed out) comes after it.
    const later = error ? `; then: ${error.message ?? error}` : "";
    error = new FlowFailure(violations.slice(0, 3).join("; ") + later);
  }
  if (error) emit("FAIL", name, error instanceof FlowFailure ? error.message : `${error?.name}: ${error?.message ?? error}`);
  else emit("PASS", name, detail ?? "");
}

// Starts an agent process, runs `op` with a connection to it, then closes
// its stdin and waits (2 s at most, like the Python SDK) for it to exit.
async function withAgent(label, editor, op) {
  agents += 1;
  const stderr = openSync(join(workdir, `agent-${agents}.stderr`), "w");
  const env = { ...process.env, SPINDLE_HOME: process.env.SPINDLE_HOME ?? join(workdir, "home") };
  const child = spawn(args.spindle, ["acp", "--script", scenarioPath, "--db", db, "--permissions", "ask", "--on-reject", "continue"], {
    cwd: workspace,
    env,
    stdio: ["pipe", "pipe", stderr],
  });
  const exited = new Promise((done) => child.on("exit", (code, signal) => done({ code, signal })));
  const base = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const writer = base.writable.getWriter();
  const stream = {
    readable: base.readable.pipeThrough(
      new TransformStream({
        transform(message, controller) {
          wire.onIncoming(message);
          controller.enqueue(message);
        },
      }),
    ),
    writable: new WritableStream({
      async write(message) {
        wire.onOutgoing(message);
        await writer.write(message);
      },
      async close() {
        await writer.close().catch(() => {});
      },
      async abort(reason) {
        await writer.abort(reason).catch(() => {});
      },
    }),
  };
  try {
    await editor.app().connectWith(stream, op);
  } finally {
    await editor.close();
    if (!child.stdin.destroyed) child.stdin.end();
    const result = await Promise.race([exited, sleep(2000).then(() => null)]);
    if (result === null) {
      child.kill("SIGKILL");
      exitCodes.push(`${label}=killed after 2 s`);
      await exited;
    } else {
      exitCodes.push(`${label}=${result.code ?? result.signal}`);
    }
  }
}

async function initialize(ctx) {
  return await ctx.request("initialize", {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: true },
    clientInfo: { name: "spindle-interop-typescript", version: "1.0.0" },
  });
}

const prompt = (ctx, sessionId, text) =>
  ctx.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });

async function firstProcess() {
  const editor = new Editor();
  await withAgent("first", editor, async (ctx) => {
    await flow("initialize", async () => {
      const answer = await initialize(ctx);
      check(answer.protocolVersion === 1, `protocolVersion ${answer.protocolVersion}`);
      const caps = answer.agentCapabilities ?? {};
      check(caps.loadSession === true, "loadSession is not advertised");
      check(caps.sessionCapabilities?.list && caps.sessionCapabilities?.resume, "session/list and session/resume are not advertised");
      return `${answer.agentInfo?.name} ${answer.agentInfo?.version}`;
    });

    await flow("new_session", async () => {
      const answer = await ctx.request("session/new", { cwd: workspace, mcpServers: [] });
      state.sessionId = answer.sessionId;
      const modes = answer.modes?.availableModes?.map((m) => m.id) ?? [];
      check(modes.includes("normal") && modes.includes("plan"), `modes ${modes}`);
      check(answer.modes.currentModeId === "normal", `current mode ${answer.modes.currentModeId}`);
      const ids = (answer.configOptions ?? []).map((o) => o.id);
      for (const id of ["mode", "tool_approval", "agent_preset"]) check(ids.includes(id), `config options ${ids}`);
      return `session ${answer.sessionId}, modes ${modes}, ${ids.length} config options`;
    }, ["initialize"]);

    await flow("stream", async () => {
      const text = "interop: stream";
      const start = editor.updates.length;
      const answer = await prompt(ctx, state.sessionId, text);
      check(answer.stopReason === "end_turn", `stopReason ${answer.stopReason}`);
      const updates = editor.updatesOf(state.sessionId, start);
      check(joined(updates, "agent_thought_chunk") === scenario.thought(text), `thought ${joined(updates, "agent_thought_chunk")}`);
      check(joined(updates, "agent_message_chunk") === scenario.text(text), `text ${joined(updates, "agent_message_chunk")}`);
      const chunks = updates.map((u) => u.sessionUpdate).filter((k) => k.endsWith("_chunk"));
      const texts = chunks.filter((k) => k === "agent_message_chunk").length;
      const thoughts = chunks.filter((k) => k === "agent_thought_chunk").length;
      check(texts > 1, "the text came in one chunk, not streamed");
      check(chunks.lastIndexOf("agent_thought_chunk") < chunks.indexOf("agent_message_chunk"), "thought chunks came after text chunks");
      return `${thoughts} thought and ${texts} text chunks`;
    }, ["new_session"]);

    await flow("tools_permissions", async () => {
      const notes = join(workspace, "notes.txt");
      editor.buffers.set(notes, `${readFileSync(notes, "utf8")}unsaved: yes\n`);
      editor.permissionAnswers = { edit: "allow_once", execute: "reject_once" };
      const start = editor.updates.length;
      const fsStart = editor.fsLog.length;
      const terminals = editor.terminalLog.length;
      const permissions = editor.permissionLog.length;
      const answer = await prompt(ctx, state.sessionId, "interop: tools");
      check(answer.stopReason === "end_turn", `stopReason ${answer.stopReason}`);
      const asked = editor.permissionLog.slice(permissions).map((p) => `${p.kind}:${p.answer}`);
      check(asked.join() === "edit:allow_once,execute:reject_once", `permission requests ${asked}`);
      const calls = [...finalStatuses(editor.updatesOf(state.sessionId, start)).values()];
      const byKind = Object.fromEntries(calls.map((c) => [c.kind, c]));
      check(Object.keys(byKind).sort().join() === "edit,execute,read", `tool calls ${JSON.stringify(calls)}`);
      check(byKind.read.status === "completed", `read ended ${byKind.read.status}`);
      check(byKind.edit.status === "completed", `edit ended ${byKind.edit.status}`);
      check(byKind.execute.status === "failed", `rejected command ended ${byKind.execute.status}`);
      check(JSON.stringify(byKind.read.content).includes("unsaved: yes"), "the read did not show the editor's unsaved buffer");
      const diff = byKind.edit.content.find((c) => c.type === "diff");
      check(diff && diff.newText.includes("status: reviewed"), `edit content ${JSON.stringify(byKind.edit.content)}`);
      const onDisk = readFileSync(notes, "utf8");
      check(onDisk === "title: interop notes\nstatus: reviewed\nunsaved: yes\n", `notes.txt is ${JSON.stringify(onDisk)}`);
      check(!existsSync(join(workspace, "rejected.txt")), "the rejected command ran");
      check(editor.terminalLog.length === terminals, "a terminal was created for the rejected command");
      const text = joined(editor.updatesOf(state.sessionId, start), "agent_message_chunk");
      check(text === scenario.text("interop: tools"), `text ${text}`);
      state.toolsFs = editor.fsLog.slice(fsStart);
      editor.buffers.delete(notes);
      return "read completed, edit allowed and applied, command rejected and not run";
    }, ["new_session"]);

    await flow("editor_fs", async () => {
      const notes = join(workspace, "notes.txt");
      const operations = state.toolsFs.filter(([, path]) => path === notes).map(([op]) => op);
      check(operations.includes("read") && operations.includes("write"), `fs requests ${JSON.stringify(state.toolsFs)}`);
      return `fs requests for notes.txt: ${operations}`;
    }, ["tools_permissions"]);

    await flow("editor_terminal", async () => {
      const text = "interop: terminal";
      editor.permissionAnswers = { execute: "allow_once" };
      const start = editor.updates.length;
      const logStart = editor.terminalLog.length;
      const answer = await prompt(ctx, state.sessionId, text);
      check(answer.stopReason === "end_turn", `stopReason ${answer.stopReason}`);
      const steps = editor.terminalLog.slice(logStart);
      check(steps.length && steps[0][0] === "create", `terminal requests ${JSON.stringify(steps)}`);
      const terminalId = steps[0][1];
      const methods = steps.map(([m]) => m);
      check(methods.at(-1) === "release" && methods.includes("wait_for_exit") && methods.includes("output"), `terminal requests ${methods}`);
      check(!editor.terminals.has(terminalId), "the terminal was not released");
      const updates = editor.updatesOf(state.sessionId, start);
      const calls = [...finalStatuses(updates).values()];
      check(calls.length === 1 && calls[0].status === "completed", `tool calls ${JSON.stringify(calls)}`);
      const embedded = updates.some((u) => u.sessionUpdate === "tool_call_update" && (u.content ?? []).some((c) => c.type === "terminal" && c.terminalId === terminalId));
      check(embedded, "the terminal was not embedded in the tool call");
      check(joined(updates, "agent_message_chunk") === scenario.text(text), `text ${joined(updates, "agent_message_chunk")}`);
      return `terminal requests ${methods}`;
    }, ["new_session"]);

    await flow("cancel", async () => {
      const text = "interop: slow";
      const start = editor.updates.length;
      const streamed = () => joined(editor.updatesOf(state.sessionId, start), "agent_message_chunk");
      let done = false;
      const running = prompt(ctx, state.sessionId, text).finally(() => {
        done = true;
      });
      await waitUntil(() => streamed() || done, "the slow stream to start");
      check(!done, "the slow prompt ended before it could be cancelled");
      const cancelledAt = Date.now();
      await ctx.notify("session/cancel", { sessionId: state.sessionId });
      const answer = await withTimeout(running, 5000, "the cancelled prompt");
      const elapsed = Date.now() - cancelledAt;
      check(answer.stopReason === "cancelled", `stopReason ${answer.stopReason}`);
      check(elapsed < 2000, `the cancel took ${elapsed} ms`);
      const partial = streamed();
      const full = scenario.text(text);
      check(full.startsWith(partial) && partial !== full, `streamed ${JSON.stringify(partial)} of ${JSON.stringify(full)}`);
      const after = editor.updates.length;
      await sleep(500);
      const late = editor.updatesOf(state.sessionId, after);
      check(late.length === 0, `updates after the cancelled answer: ${JSON.stringify(late)}`);
      const follow = "interop: after cancel";
      const followStart = editor.updates.length;
      const next = await prompt(ctx, state.sessionId, follow);
      check(next.stopReason === "end_turn", `follow-up stopReason ${next.stopReason}`);
      const followText = joined(editor.updatesOf(state.sessionId, followStart), "agent_message_chunk");
      check(followText === scenario.text(follow), `follow-up text ${followText}`);
      return `cancelled after ${partial.split(/\s+/).filter(Boolean).length} words in ${elapsed} ms; follow-up answered`;
    }, ["new_session"]);

    const modeSession = async () => {
      if (!state.secondSession) {
        state.secondSession = (await ctx.request("session/new", { cwd: workspace, mcpServers: [] })).sessionId;
      }
      return state.secondSession;
    };
    const modesSeen = (session, start) =>
      editor.updatesOf(session, start).filter((u) => u.sessionUpdate === "current_mode_update").map((u) => u.currentModeId);

    await flow("set_mode", async () => {
      const session = await modeSession();
      let start = editor.updates.length;
      await ctx.request("session/set_mode", { sessionId: session, modeId: "plan" });
      await waitUntil(() => modesSeen(session, start).join() === "plan", "current_mode_update plan");
      start = editor.updates.length;
      const answer = await prompt(ctx, session, "interop: plan");
      check(answer.stopReason === "end_turn", `plan prompt stopReason ${answer.stopReason}`);
      const plans = editor.updatesOf(session, start).filter((u) => u.sessionUpdate === "plan");
      check(plans.length && plans.at(-1).entries.length === 2, `plan updates ${JSON.stringify(plans)}`);
      start = editor.updates.length;
      await ctx.request("session/set_mode", { sessionId: session, modeId: "normal" });
      await waitUntil(() => modesSeen(session, start).join() === "normal", "current_mode_update normal");
      return "normal → plan (plan update with 2 entries) → normal";
    }, ["initialize"]);

    await flow("set_config_option", async () => {
      const session = await modeSession();
      for (const [configId, value] of [["tool_approval", "auto"], ["agent_preset", "delivery"], ["tool_approval", "ask"], ["agent_preset", "light"]]) {
        const answer = await ctx.request("session/set_config_option", { sessionId: session, configId, value });
        check(currentValue(answer, configId) === value, `${configId} is ${currentValue(answer, configId)} after setting ${value}`);
      }
      const start = editor.updates.length;
      let answer = await ctx.request("session/set_config_option", { sessionId: session, configId: "mode", value: "plan" });
      check(currentValue(answer, "mode") === "plan", "mode did not change to plan");
      await waitUntil(() => modesSeen(session, start).includes("plan"), "current_mode_update after setting the mode option");
      answer = await ctx.request("session/set_config_option", { sessionId: session, configId: "mode", value: "normal" });
      check(currentValue(answer, "mode") === "normal", "mode did not change back to normal");
      return "tool_approval auto/ask, agent_preset delivery/light, mode plan/normal";
    }, ["initialize"]);
  });
}

async function secondProcess() {
  const editor = new Editor();
  await withAgent("load", editor, async (ctx) => {
    await flow("session_list", async () => {
      await initialize(ctx);
      const answer = await ctx.request("session/list", { cwd: workspace });
      const info = answer.sessions.find((s) => s.sessionId === state.sessionId);
      check(info, `${state.sessionId} not in ${answer.sessions.map((s) => s.sessionId)}`);
      check(info.cwd === workspace, `cwd ${info.cwd}`);
      check(info.title === "interop: stream", `title ${info.title}`);
      return `${answer.sessions.length} sessions in the workspace, title ${JSON.stringify(info.title)}`;
    }, ["stream"]);

    await flow("session_load", async () => {
      const first = wire.incoming.length;
      await ctx.request("session/load", { sessionId: state.sessionId, cwd: workspace, mcpServers: [] });
      const messages = wire.incoming.slice(first);
      const answerAt = messages.findIndex((m) => "id" in m && !("method" in m));
      const replay = messages.slice(0, answerAt).filter((m) => m.method === "session/update").map((m) => m.params.update);
      const late = messages.slice(answerAt + 1).filter((m) => m.method === "session/update" && m.params.update.sessionUpdate.endsWith("_chunk"));
      check(late.length === 0, "replayed chunks arrived after the load answer");
      const users = replay.filter((u) => u.sessionUpdate === "user_message_chunk").map((u) => u.content.text);
      check(users.join("|") === FIRST_PROCESS_PROMPTS.join("|"), `replayed user messages ${JSON.stringify(users)}`);
      check(joined(replay, "agent_message_chunk").includes(scenario.text("interop: stream")), "the streamed answer was not replayed");
      check(joined(replay, "agent_thought_chunk").includes(scenario.thought("interop: stream")), "the thought was not replayed");
      const kinds = replay.filter((u) => u.sessionUpdate === "tool_call").map((u) => u.kind);
      check(kinds.join() === "read,edit,execute,execute", `replayed tool calls ${kinds}`);
      const follow = "interop: after load";
      const start = editor.updates.length;
      const answer = await prompt(ctx, state.sessionId, follow);
      check(answer.stopReason === "end_turn", `stopReason after load ${answer.stopReason}`);
      const text = joined(editor.updatesOf(state.sessionId, start), "agent_message_chunk");
      check(text === scenario.text(follow), `text after load ${text}`);
      return `${replay.length} updates replayed before the answer; ${users.length} user messages; follow-up answered`;
    }, ["session_list"]);
  });
}

async function thirdProcess() {
  const editor = new Editor();
  await withAgent("resume", editor, async (ctx) => {
    await flow("session_resume", async () => {
      await initialize(ctx);
      const start = editor.updates.length;
      const answer = await ctx.request("session/resume", { sessionId: state.sessionId, cwd: workspace, mcpServers: [] });
      check(answer.modes && answer.configOptions?.length, "no modes or config options in the answer");
      await sleep(100);
      const replayed = editor.updatesOf(state.sessionId, start).filter((u) => u.sessionUpdate.endsWith("_chunk"));
      check(replayed.length === 0, `resume replayed ${replayed.length} chunks`);
      const follow = "interop: after resume";
      const result = await prompt(ctx, state.sessionId, follow);
      check(result.stopReason === "end_turn", `stopReason after resume ${result.stopReason}`);
      const text = joined(editor.updatesOf(state.sessionId, start), "agent_message_chunk");
      check(text === scenario.text(follow), `text after resume ${text}`);
      return "no replay; follow-up answered";
    }, ["stream"]);
  });
}

async function main() {
  for (const step of [firstProcess, secondProcess, thirdProcess]) {
    try {
      await step();
    } catch (error) {
      log("agent process failed:", error?.stack ?? error);
    }
  }
  await flow("agent_exit", async () => {
    check(exitCodes.every((c) => c.endsWith("=0")), `exit codes after stdin closed: ${exitCodes}`);
    return `${exitCodes.join(", ")}; ${wire.validated} messages validated`;
  });
  for (const name of FLOWS) {
    if (!outcomes.has(name)) emit("FAIL", name, "the client did not run this flow");
  }
}

await main();
process.exit(0);
