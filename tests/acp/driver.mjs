// Drives `warden acp` as an editor would, with the official ACP TypeScript SDK, and prints one
// JSON object of what it saw (responses, errors, every session/update, every permission request
// and every raw line the agent wrote) for the Rust test to assert on.
//
//   node driver.mjs SCENARIO
//
// WARDEN_BIN is the binary; WARDEN_ACP_CWD the editor's folder; WARDEN_ACP_MCP a JSON array of
// MCP servers to pass to session/new; WARDEN_ACP_REJECT a title prefix whose permission requests
// are rejected (all others are allowed once); WARDEN_ACP_SESSION a saved session id to load;
// WARDEN_ACP_BUFFERS a JSON object of path → text: when set, the client offers its file system,
// answers reads of those paths from it (an unsaved buffer) and keeps the writes;
// WARDEN_ACP_TERMINAL=1: the client offers its terminal and runs `terminal/create` commands for
// real (recording every terminal request); WARDEN_ACP_INSIST_ALWAYS=1: permission requests it
// allows are answered `allow_always`, offered or not; WARDEN_ACP_HOLD a title prefix whose
// permission requests are not answered until warden withdraws them (`$/cancel_request`) or 5 s
// pass.
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { Readable, Writable } from "node:stream";
import { RequestError, client, methods, ndJsonStream } from "@agentclientprotocol/sdk";

const scenario = process.argv[2];
const cwd = process.env.WARDEN_ACP_CWD;
const mcpServers = JSON.parse(process.env.WARDEN_ACP_MCP ?? "[]");
const reject = process.env.WARDEN_ACP_REJECT ?? "\u0000";
const buffers = process.env.WARDEN_ACP_BUFFERS ? JSON.parse(process.env.WARDEN_ACP_BUFFERS) : null;
const offersTerminal = process.env.WARDEN_ACP_TERMINAL === "1";
const insistAlways = process.env.WARDEN_ACP_INSIST_ALWAYS === "1";
const hold = process.env.WARDEN_ACP_HOLD ?? "\u0000";
/** Called when a held permission request arrives. */
let onHeld = () => {};

const agent = spawn(process.env.WARDEN_BIN, ["acp"], {
  cwd,
  stdio: ["pipe", "pipe", "inherit"],
});
const seen = {
  scenario,
  updates: [],
  permissions: [],
  errors: [],
  stops: [],
  lines: [],
  reads: [],
  writes: [],
  terminals: [],
};
/** The editor's terminals: a real child process each, its output and how it ended. */
const terminals = new Map();
// Every line the agent writes is kept as well, for answers the SDK does not surface (the
// response to a malformed line has no id).
let pending = "";
agent.stdout.on("data", (chunk) => {
  pending += chunk.toString("utf8");
  let newline;
  while ((newline = pending.indexOf("\n")) >= 0) {
    seen.lines.push(pending.slice(0, newline));
    pending = pending.slice(newline + 1);
  }
});
const listeners = [];
const stream = ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));

const app = client({ name: "warden-acp-test" })
  .onNotification(methods.client.session.update, ({ params }) => {
    seen.updates.push(params);
    for (const listener of listeners) listener(params);
  })
  .onRequest(methods.client.session.requestPermission, async ({ params, signal }) => {
    seen.permissions.push(params);
    const title = params.toolCall.title ?? "";
    if (title.startsWith(hold)) {
      onHeld(params);
      // The dialog stays open until warden withdraws the question, as an editor's would.
      const withdrawn = await new Promise((resolve) => {
        if (signal.aborted) return resolve(true);
        const timer = setTimeout(() => resolve(false), 5000);
        signal.addEventListener("abort", () => {
          clearTimeout(timer);
          resolve(true);
        }, { once: true });
      });
      seen.withdrawn = withdrawn;
      return { outcome: withdrawn ? { outcome: "cancelled" } : { outcome: "selected", optionId: "allow_once" } };
    }
    const option = title.startsWith(reject) ? "reject_once" : insistAlways ? "allow_always" : "allow_once";
    return { outcome: { outcome: "selected", optionId: option } };
  })
  .onRequest(methods.client.fs.readTextFile, ({ params }) => {
    seen.reads.push(params);
    if (buffers === null || !(params.path in buffers)) {
      throw RequestError.invalidParams({ path: params.path }, "no buffer for this path");
    }
    return { content: buffers[params.path] };
  })
  .onRequest(methods.client.fs.writeTextFile, ({ params }) => {
    seen.writes.push(params);
    return {};
  })
  .onRequest(methods.client.terminal.create, ({ params }) => {
    const terminalId = randomUUID();
    seen.terminals.push({ request: "create", terminalId, ...params });
    // A process group of its own, so a kill ends the command's children too.
    const child = spawn(params.command, params.args ?? [], {
      cwd: params.cwd,
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    const terminal = { child, output: "", exit: null };
    terminal.exited = new Promise((resolve) => {
      child.on("exit", (code, signal) => {
        terminal.exit = { exitCode: code, signal: signal ?? null };
        resolve(terminal.exit);
      });
    });
    const keep = (chunk) => (terminal.output += chunk.toString("utf8"));
    child.stdout.on("data", keep);
    child.stderr.on("data", keep);
    terminals.set(terminalId, terminal);
    return { terminalId };
  })
  .onRequest(methods.client.terminal.waitForExit, async ({ params }) => {
    seen.terminals.push({ request: "wait_for_exit", terminalId: params.terminalId });
    return await terminals.get(params.terminalId).exited;
  })
  .onRequest(methods.client.terminal.output, ({ params }) => {
    seen.terminals.push({ request: "output", terminalId: params.terminalId });
    const terminal = terminals.get(params.terminalId);
    return { output: terminal.output, truncated: false, exitStatus: terminal.exit };
  })
  .onRequest(methods.client.terminal.kill, async ({ params }) => {
    seen.terminals.push({ request: "kill", terminalId: params.terminalId });
    const terminal = terminals.get(params.terminalId);
    if (terminal.exit === null) process.kill(-terminal.child.pid, "SIGKILL");
    await terminal.exited;
    return {};
  })
  .onRequest(methods.client.terminal.release, ({ params }) => {
    seen.terminals.push({ request: "release", terminalId: params.terminalId });
    const terminal = terminals.get(params.terminalId);
    if (terminal.exit === null) process.kill(-terminal.child.pid, "SIGKILL");
    terminals.delete(params.terminalId);
    return {};
  });

/** Resolves at the first update for which `predicate` holds. */
function waitFor(predicate) {
  return new Promise((resolve) => {
    const listener = (update) => {
      if (predicate(update)) {
        listeners.splice(listeners.indexOf(listener), 1);
        resolve(update);
      }
    };
    listeners.push(listener);
  });
}

/** The error of a request that must fail, as `{code, message, data}`. */
async function failing(promise) {
  try {
    const result = await promise;
    return { unexpected: result };
  } catch (error) {
    return { code: error.code, message: error.message, data: error.data };
  }
}

async function initialize(ctx) {
  return ctx.request(methods.agent.initialize, {
    protocolVersion: 1,
    clientCapabilities: {
      fs: { readTextFile: buffers !== null, writeTextFile: buffers !== null },
      terminal: offersTerminal,
    },
    clientInfo: { name: "warden-acp-test", version: "1.0.0" },
  });
}

async function prompt(ctx, sessionId, text) {
  const response = await ctx.request(methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text }],
  });
  seen.stops.push(response.stopReason);
  return response;
}

const scenarios = {
  // Initialize, a session with the client's MCP servers, one prompt that streams text and calls
  // tools (the model's script decides which), then a slash command.
  async tour(ctx) {
    seen.initialize = await initialize(ctx);
    const session = await ctx.request(methods.agent.session.new, { cwd, mcpServers });
    seen.sessionId = session.sessionId;
    await prompt(ctx, session.sessionId, "tidy up the notes");
    if (process.env.WARDEN_ACP_SLASH) {
      await prompt(ctx, session.sessionId, process.env.WARDEN_ACP_SLASH);
    }
  },
  // A prompt whose tool runs long: cancelled at its first progress update; then the session
  // takes the next prompt.
  async cancel(ctx) {
    await initialize(ctx);
    const session = await ctx.request(methods.agent.session.new, { cwd, mcpServers });
    seen.sessionId = session.sessionId;
    const progressed = waitFor(
      (update) =>
        update.update.sessionUpdate === "tool_call_update" &&
        update.update.status === "in_progress",
    );
    const running = prompt(ctx, session.sessionId, "run the long one");
    await progressed;
    await ctx.notify(methods.agent.session.cancel, { sessionId: session.sessionId });
    await running;
    await prompt(ctx, session.sessionId, "are you still there?");
  },
  // A prompt whose tool call waits for the person's answer: the turn is cancelled while the
  // question is open; then the session takes the next prompt.
  async cancelAsk(ctx) {
    await initialize(ctx);
    const session = await ctx.request(methods.agent.session.new, { cwd, mcpServers });
    seen.sessionId = session.sessionId;
    const held = new Promise((resolve) => (onHeld = resolve));
    const running = prompt(ctx, session.sessionId, "write the note");
    await held;
    await ctx.notify(methods.agent.session.cancel, { sessionId: session.sessionId });
    await running;
    await prompt(ctx, session.sessionId, "are you still there?");
  },
  // A saved session loaded: its conversation replayed, then one more prompt in it.
  async load(ctx) {
    seen.initialize = await initialize(ctx);
    seen.sessionId = process.env.WARDEN_ACP_SESSION;
    seen.loaded = await ctx.request(methods.agent.session.load, {
      sessionId: seen.sessionId,
      cwd,
      mcpServers,
    });
    seen.replayed = seen.updates.length;
    await prompt(ctx, seen.sessionId, "and once more");
  },
  // The same saved session loaded twice at once: one load opens it, the other is refused; the
  // session then takes a prompt.
  async loadTwice(ctx) {
    await initialize(ctx);
    seen.sessionId = process.env.WARDEN_ACP_SESSION;
    const load = () =>
      ctx
        .request(methods.agent.session.load, { sessionId: seen.sessionId, cwd, mcpServers })
        .then((result) => ({ result }), (error) => ({ code: error.code, message: error.message, data: error.data }));
    seen.loads = await Promise.all([load(), load()]);
    await prompt(ctx, seen.sessionId, "and once more");
  },
  // Bad input: a malformed line, an unknown session, a saved session that does not exist, a
  // prompt while one runs; the agent answers each with the protocol's error and keeps going.
  async bad(ctx) {
    await initialize(ctx);
    agent.stdin.write("{this is not json\n");
    seen.unknownMethod = await failing(ctx.request("warden/no_such_method", {}));
    seen.unknownSession = await failing(
      ctx.request(methods.agent.session.prompt, {
        sessionId: "no-such-session",
        prompt: [{ type: "text", text: "hello" }],
      }),
    );
    seen.unknownLoad = await failing(
      ctx.request(methods.agent.session.load, {
        sessionId: "00000000-no-such",
        cwd,
        mcpServers: [],
      }),
    );
    seen.relativeCwd = await failing(
      ctx.request(methods.agent.session.new, { cwd: "relative/dir", mcpServers: [] }),
    );
    const session = await ctx.request(methods.agent.session.new, { cwd, mcpServers });
    seen.sessionId = session.sessionId;
    const started = waitFor((update) => update.update.sessionUpdate === "tool_call");
    const running = prompt(ctx, session.sessionId, "take your time");
    await started;
    seen.busy = await failing(
      ctx.request(methods.agent.session.prompt, {
        sessionId: session.sessionId,
        prompt: [{ type: "text", text: "me too" }],
      }),
    );
    await running;
    seen.after = await initialize(ctx);
  },
};

try {
  await app.connectWith(stream, async (ctx) => {
    await scenarios[scenario](ctx);
  });
} catch (error) {
  seen.errors.push(String(error?.stack ?? error));
}
agent.stdin.end();
const code = await new Promise((resolve) => agent.on("close", resolve));
seen.exitCode = code;
process.stdout.write(`${JSON.stringify(seen)}\n`);
