// Drives `warden serve --a2a` as an A2A v0.3 agent would, with the official A2A JavaScript SDK
// of that protocol version (@a2a-js/sdk 0.3.x, installed as `a2a-sdk-v03`): JSON-RPC methods
// `message/send`, `message/stream`, `tasks/get`, `tasks/cancel`, objects tagged with `kind`.
// Prints one JSON object of what it saw for the Rust test to assert on.
//
//   node driver-v03.mjs SCENARIO
//
// WARDEN_A2A_URL is the server's base URL (http://127.0.0.1:PORT); WARDEN_A2A_TOKEN its bearer
// token. Scenarios: tour (card, send, stream with tool progress, approvals allowed and denied),
// cancel, refusals (no token, rebound Host, foreign Origin, with v0.3 method names).
import * as sdk from "a2a-sdk-v03/client";
import { base, clientFactory, expectError as keepError, raw, rpc, run, scenario, token } from "./common.mjs";

const seen = { scenario, errors: [] };
const factory = clientFactory(sdk);

let nextId = 0;
/** A v0.3 user message with one text part, in a context (and a task, when answering). */
function message(text, { contextId, taskId, metadata } = {}) {
  return {
    message: {
      kind: "message",
      messageId: `driver-v03-${++nextId}`,
      role: "user",
      parts: [{ kind: "text", text }],
      ...(contextId ? { contextId } : {}),
      ...(taskId ? { taskId } : {}),
      ...(metadata ? { metadata } : {}),
    },
  };
}

/** Streams a message; every event as it came (v0.3 objects are plain JSON). */
async function stream(client, params, onEvent = async () => {}) {
  const events = [];
  for await (const event of client.sendMessageStream(params)) {
    events.push(event);
    await onEvent(event);
  }
  return events;
}

function taskIdOf(events) {
  return events.find((event) => event.kind === "task")?.id;
}

function errorOf(error) {
  return {
    name: error?.constructor?.name ?? error?.name,
    code: error?.errorResponse?.error?.code ?? error?.code,
    message: String(error?.errorResponse?.error?.message ?? error?.message ?? error),
  };
}

/** Runs `action`, keeping its error (expected ones are asserted by the test). */
const expectError = (action) => keepError(errorOf, action);

async function tour() {
  const client = await factory.createFromUrl(base);
  seen.card = await client.getAgentCard();

  // A blocking send: the completed task with the answer.
  const first = await client.sendMessage(message("Say hello."));
  seen.sent = first;
  const contextId = first.contextId;

  // A stream in the same context: a long-running MCP tool with progress.
  seen.streamed = await stream(client, message("Run the long operation.", { contextId }));

  // A write that needs approval: input-required, then allowed by the next message.
  seen.asked = await stream(client, message("Write a note.", { contextId }));
  const writeTask = taskIdOf(seen.asked);
  seen.allowed = await stream(client, message("allow", { contextId, taskId: writeTask }));
  seen.writeTask = await client.getTask({ id: writeTask });

  // A command that needs approval, denied with a reason by a blocking send.
  const bash = await stream(client, message("Run a command.", { contextId }));
  seen.bashAsked = bash;
  const bashTask = taskIdOf(bash);
  seen.badAnswer = await expectError(() => client.sendMessage(message("maybe later", { taskId: bashTask })));
  seen.denied = await client.sendMessage(message("deny: not today", { taskId: bashTask }));
  seen.unknownTask = await expectError(() => client.getTask({ id: "no-such-task" }));
}

async function cancel() {
  const client = await factory.createFromUrl(base);
  let taskId;
  let cancelled;
  seen.streamed = await stream(client, message("Run the long operation."), async (event) => {
    if (event.kind === "task") taskId ??= event.id;
    if (!cancelled && event.kind === "status-update" && event.metadata?.["warden/progress"]) {
      cancelled = client.cancelTask({ id: taskId });
    }
  });
  seen.cancelled = await cancelled;
  seen.afterCancel = await client.getTask({ id: taskId });
  seen.cancelAgain = await expectError(() => client.cancelTask({ id: taskId }));
  seen.next = await client.sendMessage(message("Are you there?", { contextId: seen.cancelled.contextId }));
}

async function refusals() {
  const bearer = { authorization: `Bearer ${token}` };
  const host = new URL(base).host;
  const send = rpc("message/send", message("Let me in."));
  seen.noToken = await raw({ headers: { host }, body: send });
  seen.wrongToken = await raw({ headers: { host, authorization: "Bearer wrong" }, body: send });
  seen.reboundHost = await raw({ headers: { ...bearer, host: "attacker.example:80" }, body: send });
  seen.reboundCard = await raw({ method: "GET", path: "/.well-known/agent-card.json", headers: { host: "attacker.example" } });
  seen.foreignOrigin = await raw({ headers: { ...bearer, host, origin: "https://attacker.example" }, body: send });
  seen.badPart = await raw({
    headers: { ...bearer, host },
    body: rpc("message/send", { message: { kind: "message", messageId: "m", role: "user", parts: [{ kind: "video" }] } }),
  });
  seen.resubscribe = await raw({ headers: { ...bearer, host }, body: rpc("tasks/resubscribe", { id: "x" }) });
  seen.pushConfig = await raw({ headers: { ...bearer, host }, body: rpc("tasks/pushNotificationConfig/set", {}) });
  // The server still serves the SDK.
  const client = await factory.createFromUrl(base);
  seen.after = await client.sendMessage(message("Still there?"));
}

const scenarios = { tour, cancel, refusals };
await run(scenarios, seen, errorOf);
