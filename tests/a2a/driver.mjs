// Drives `warden serve --a2a` as another agent would, with the official A2A JavaScript SDK, and
// prints one JSON object of what it saw (the card, tasks, every stream event in A2A's wire
// form, errors, and raw HTTP answers to bad requests) for the Rust test to assert on.
//
//   node driver.mjs SCENARIO
//
// WARDEN_A2A_URL is the server's base URL (http://127.0.0.1:PORT); WARDEN_A2A_TOKEN its bearer
// token. Scenarios: tour (card, send, stream with tool progress, approvals allowed and denied),
// cancel, refusals (raw bad requests, then good ones and one context too many), idle (an idle
// context closed to make room), hostile (answers `allow` to anything
// warden asks).
import * as sdk from "@a2a-js/sdk/client";
import { AgentCard, StreamResponse, Task } from "@a2a-js/sdk";
import { base, clientFactory, expectError as keepError, raw, rpc, run, scenario, token } from "./common.mjs";

const seen = { scenario, errors: [] };
const factory = clientFactory(sdk);

let nextId = 0;
/** A user message with one text part, in a context (and a task, when answering). */
function message(text, { contextId, taskId, metadata } = {}) {
  return {
    message: {
      messageId: `driver-${++nextId}`,
      role: 1, // ROLE_USER
      parts: [{ content: { $case: "text", value: text } }],
      ...(contextId ? { contextId } : {}),
      ...(taskId ? { taskId } : {}),
      ...(metadata ? { metadata } : {}),
    },
  };
}

/** Streams a message; every event in wire form, and the last task id and state seen. */
async function stream(client, params, onEvent = async () => {}) {
  const events = [];
  for await (const event of client.sendMessageStream(params)) {
    const wire = StreamResponse.toJSON(event);
    events.push(wire);
    await onEvent(wire);
  }
  return events;
}

function lastState(events) {
  const states = events
    .map((event) => event.statusUpdate?.status?.state ?? event.task?.status?.state)
    .filter(Boolean);
  return states[states.length - 1];
}

function taskIdOf(events) {
  return events[0]?.task?.id;
}

function errorOf(error) {
  return {
    name: error?.name,
    code: error?.envelopeCode ?? error?.code ?? error?.error?.code,
    message: String(error?.message ?? error),
  };
}

/** Runs `action`, keeping its error (expected ones are asserted by the test). */
const expectError = (action) => keepError(errorOf, action);

async function tour() {
  const client = await factory.createFromUrl(base);
  seen.card = AgentCard.toJSON(await client.getAgentCard());

  // A blocking send: the completed task with the answer.
  const first = await client.sendMessage(message("Say hello."));
  seen.sent = Task.toJSON(first);
  const contextId = first.contextId;

  // A stream in the same context: a long-running MCP tool with progress.
  seen.streamed = await stream(client, message("Run the long operation.", { contextId }));

  // A write that needs approval: input-required, then allowed by the next message.
  seen.asked = await stream(client, message("Write a note.", { contextId }));
  const writeTask = taskIdOf(seen.asked);
  seen.allowed = await stream(client, message("allow", { contextId, taskId: writeTask }));
  seen.writeTask = Task.toJSON(await client.getTask({ id: writeTask }));

  // A command that needs approval: an answer that is none of the answers is refused and the
  // task still waits; then it is denied with a reason, by a blocking send.
  const bash = await stream(client, message("Run a command.", { contextId }));
  seen.bashAsked = bash;
  const bashTask = taskIdOf(bash);
  seen.badAnswer = await expectError(() => client.sendMessage(message("maybe later", { taskId: bashTask })));
  seen.stillWaiting = Task.toJSON(await client.getTask({ id: bashTask }));
  seen.denied = Task.toJSON(await client.sendMessage(message("deny: not today", { taskId: bashTask })));
  seen.answerAgain = await expectError(() => client.sendMessage(message("allow", { taskId: bashTask })));
  seen.unknownAgent = await expectError(() =>
    client.sendMessage(message("hi", { metadata: { "warden/agent": "no-such-agent" } })),
  );
}

async function cancel() {
  const client = await factory.createFromUrl(base);
  let taskId;
  let cancelled;
  seen.streamed = await stream(client, message("Run the long operation."), async (event) => {
    taskId ??= event.task?.id;
    if (!cancelled && event.statusUpdate?.metadata?.["warden/progress"]) {
      cancelled = client.cancelTask({ id: taskId }).then((task) => Task.toJSON(task));
    }
  });
  seen.cancelled = await cancelled;
  seen.afterCancel = Task.toJSON(await client.getTask({ id: taskId }));
  seen.cancelAgain = await expectError(() => client.cancelTask({ id: taskId }));
  const next = await client.sendMessage(message("Are you there?", { contextId: seen.cancelled.contextId }));
  seen.next = Task.toJSON(next);
}

async function refusals() {
  const bearer = { authorization: `Bearer ${token}` };
  const host = new URL(base).host;
  seen.noToken = await raw({ headers: { host }, body: rpc("GetTask", { id: "x" }) });
  seen.wrongToken = await raw({ headers: { host, authorization: "Bearer wrong" }, body: rpc("GetTask", { id: "x" }) });
  seen.reboundHost = await raw({ headers: { ...bearer, host: "attacker.example:80" }, body: rpc("GetTask", { id: "x" }) });
  seen.reboundCard = await raw({ method: "GET", path: "/.well-known/agent-card.json", headers: { host: "attacker.example" } });
  seen.foreignOrigin = await raw({ headers: { ...bearer, host, origin: "https://attacker.example" }, body: rpc("GetTask", { id: "x" }) });
  seen.tooLarge = await raw({
    headers: { ...bearer, host, expect: "100-continue" },
    body: "x".repeat(5 * 1024 * 1024),
  });
  seen.malformed = await raw({ headers: { ...bearer, host }, body: "{\"jsonrpc\": \"2.0\", \"id\": 1, " });
  seen.notJsonRpc = await raw({ headers: { ...bearer, host }, body: "[1, 2, 3]" });
  seen.unknownMethod = await raw({ headers: { ...bearer, host }, body: rpc("message/explode") });
  seen.noMessage = await raw({ headers: { ...bearer, host }, body: rpc("SendMessage", {}) });
  const client = await factory.createFromUrl(base);
  seen.unknownTask = await expectError(() => client.getTask({ id: "no-such-task" }));
  const after = await client.sendMessage(message("Still there?"));
  seen.after = Task.toJSON(after);
  seen.crowded = await expectError(() => client.sendMessage(message("Another context?")));
  seen.sameContext = Task.toJSON(await client.sendMessage(message("Again?", { contextId: after.contextId })));
}

/** Two contexts one after the other on a server that keeps one: the first, once idle, makes room. */
async function idle() {
  const client = await factory.createFromUrl(base);
  const first = await client.sendMessage(message("First."));
  seen.first = Task.toJSON(first);
  // Longer than the server's --session-idle-timeout of one second.
  await new Promise((resolve) => setTimeout(resolve, 1500));
  seen.second = Task.toJSON(await client.sendMessage(message("Second.")));
  seen.firstTask = Task.toJSON(await client.getTask({ id: first.id }));
}

/** Sends `text` and answers `allow` to whatever warden asks, until the task ends. */
async function hostile() {
  const client = await factory.createFromUrl(base);
  seen.events = [];
  let events = await stream(client, message("Summarise the echo."));
  seen.events.push(...events);
  const taskId = taskIdOf(events);
  while (lastState(events) === "TASK_STATE_INPUT_REQUIRED") {
    events = await stream(client, message("allow", { taskId }));
    seen.events.push(...events);
  }
  seen.task = Task.toJSON(await client.getTask({ id: taskId }));
}

const scenarios = { tour, cancel, refusals, idle, hostile };
await run(scenarios, seen, errorOf);
