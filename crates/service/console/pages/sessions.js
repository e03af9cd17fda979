// pages/sessions.js: the tenant's sessions with where each stands, and a live view of one: its messages, tool calls with progress and results (artifacts as download links), and its events as they stream.

import { api, download, follow, watchTenant } from "../api.js";
import { h, notice, prettyJson, replace, when, withoutRawData } from "../dom.js";

/** Where a session stands, in the words an operator reads. */
function standing(session, awaitingApproval, awaitingClient) {
  if (session.state === "running") {
    if (awaitingApproval.has(session.id)) return ["waiting for approval", "warn"];
    if (awaitingClient.has(session.id)) return ["waiting for a client tool", "warn"];
    return ["running", "live"];
  }
  if (session.state === "interrupted") return ["interrupted", "bad"];
  if (session.state === "failed") return ["failed", "bad"];
  return [session.updated_at > session.created_at ? "done" : "new", "quiet"];
}

export async function show(main, [id], signal) {
  if (id) return showOne(main, id, signal);
  const table = h("tbody");
  const status = h("div");
  replace(main,
    h("h1", {}, "Sessions"),
    h("p", { class: "muted" }, "Every session of your tenant; the list refreshes by itself. Open one to watch it live."),
    status,
    h("table", { class: "grid", id: "sessions" },
      h("thead", {}, h("tr", {}, h("th", {}, "Session"), h("th", {}, "Agent"), h("th", {}, "State"),
        h("th", {}, "Created"), h("th", {}, "Last change"))),
      table));
  const refresh = async () => {
    const [{ sessions }, { approvals }] = await Promise.all([api("GET", "/sessions"), api("GET", "/approvals")]);
    const awaitingApproval = new Set(approvals.map((approval) => approval.session));
    const awaitingClient = new Set();
    await Promise.all(sessions.filter((session) => session.state === "running").map(async (session) => {
      const { client_calls: calls } = await api("GET", `/sessions/${encodeURIComponent(session.id)}/client-calls`);
      if (calls.length > 0) awaitingClient.add(session.id);
    }));
    const rows = [...sessions].reverse().map((session) => {
      const [label, tone] = standing(session, awaitingApproval, awaitingClient);
      return h("tr", { dataset: { session: session.id } },
        h("td", {}, h("a", { href: `#/sessions/${encodeURIComponent(session.id)}` }, session.id)),
        h("td", {}, session.agent || "(default)"),
        h("td", {}, h("span", { class: `badge ${tone}` }, label)),
        h("td", {}, when(session.created_at)),
        h("td", {}, when(session.updated_at)));
    });
    replace(table, rows.length ? rows : h("tr", {}, h("td", { colspan: 5, class: "muted" }, "No sessions yet.")));
  };
  await refresh();
  // Every event of the tenant's stream names a session this list shows, or says to load it again.
  watchTenant(() => {
    refresh().then(() => replace(status), (error) => replace(status, notice("error", error.message)));
  }, signal);
}

/** One session, live: the conversation built from its events, and the events themselves. */
async function showOne(main, id, signal) {
  const { session } = await api("GET", `/sessions/${encodeURIComponent(id)}`);
  const stateBadge = h("span", { class: "badge", id: "session-state" }, session.state);
  const streamState = h("span", { class: "muted", id: "stream-state" }, "connecting…");
  const conversation = h("div", { class: "conversation", id: "conversation", "aria-live": "polite" });
  const log = h("ol", { class: "events", id: "events" });
  const artifacts = h("section", { id: "artifacts", "aria-label": "Artifacts" });
  const artifactStatus = h("div");
  const refreshArtifacts = async () => {
    try {
      const { artifacts: listed } = await api("GET", `/sessions/${encodeURIComponent(id)}/artifacts`);
      replace(artifacts, h("h2", {}, "Artifacts"), artifactStatus,
        listed.length ? h("table", { class: "grid", id: "artifacts-table" },
          h("thead", {}, h("tr", {}, ["Artifact", "Tool", "Type", "Size"].map((title) => h("th", {}, title)))),
          h("tbody", {}, listed.map((artifact) => h("tr", { dataset: { artifact: artifact.id } },
            h("td", {}, artifactLink(artifact.id)),
            h("td", {}, h("code", {}, `${artifact.server} / ${artifact.tool}`)),
            h("td", {}, artifact.mime),
            h("td", {}, bytes(artifact.bytes))))))
          : h("p", { class: "muted" }, "No artifacts."));
    } catch (error) {
      replace(artifactStatus, notice("error", error.message));
    }
  };
  /** A button that downloads the session's artifact `artifactId`. */
  const artifactLink = (artifactId) => h("button", {
    type: "button", class: "link", dataset: { download: artifactId }, onclick: () => {
      download(`/sessions/${encodeURIComponent(id)}/artifacts/${encodeURIComponent(artifactId)}`, artifactId)
        .then(() => replace(artifactStatus), (error) => replace(artifactStatus, notice("error", error.message)));
    },
  }, `artifact ${artifactId}`);
  /** A tool result's text, each `artifact ID` it names a download link. */
  const withArtifactLinks = (text) => {
    const parts = [];
    let last = 0;
    for (const match of text.matchAll(/\bartifact ([A-Za-z0-9_-]{1,64})\b/g)) {
      parts.push(text.slice(last, match.index), artifactLink(match[1]));
      last = match.index + match[0].length;
    }
    parts.push(text.slice(last));
    return parts;
  };
  replace(main,
    h("p", {}, h("a", { href: "#/sessions" }, "← Sessions")),
    h("h1", {}, "Session ", h("code", {}, session.id)),
    h("p", {}, "Agent ", h("strong", {}, session.agent || "(default)"), " · ", stateBadge, " · stream ", streamState),
    h("div", { class: "split" },
      h("section", { "aria-label": "Conversation" }, h("h2", {}, "Conversation"), conversation),
      h("section", { "aria-label": "Events" }, h("h2", {}, "Events"), log)),
    artifacts);
  await refreshArtifacts();

  let reply = null;
  const calls = new Map();
  const say = (who, text, kind = who) => {
    const body = h("div", { class: "text" }, text);
    conversation.append(h("div", { class: `message ${kind}` }, h("div", { class: "who" }, who), body));
    conversation.lastChild.scrollIntoView({ block: "nearest" });
    return body;
  };
  const callCard = (callId, name, args) => {
    const progress = h("progress", { max: 1, "aria-label": `progress of ${name}` });
    const progressNote = h("span", { class: "muted" });
    const result = h("div", { class: "result" });
    const status = h("span", { class: "badge live" }, "running");
    const card = h("div", { class: "tool-call", dataset: { call: callId } },
      h("div", { class: "who" }, "tool ", h("code", {}, name), " ", status),
      prettyJson(args),
      h("div", { class: "progress" }, progress, " ", progressNote),
      result);
    conversation.append(card);
    const entry = { card, progress, progressNote, result, status };
    calls.set(callId, entry);
    return entry;
  };
  const onEvent = (seq, event) => {
    log.append(h("li", { dataset: { type: event.type } }, h("code", {}, `#${seq}`), " ", h("strong", {}, event.type), " ", summary(event)));
    log.lastChild.scrollIntoView({ block: "nearest" });
    switch (event.type) {
      case "run_started":
        reply = null;
        stateBadge.textContent = "running";
        say(event.caller || "user", event.message, "user");
        break;
      case "run_resumed":
        stateBadge.textContent = "running";
        break;
      case "text_delta":
        if (!reply) reply = say("assistant", "", "assistant");
        reply.textContent += event.text;
        break;
      case "tool_call_started":
        reply = null;
        callCard(event.id, event.name, event.arguments);
        break;
      case "tool_progress": {
        const entry = calls.get(event.id);
        if (!entry) break;
        if (typeof event.progress === "number") {
          entry.progress.max = typeof event.total === "number" && event.total > 0 ? event.total : Math.max(event.progress, 1);
          entry.progress.value = event.progress;
        }
        entry.progressNote.textContent = event.message || "";
        break;
      }
      case "tool_call_finished": {
        const entry = calls.get(event.id) || callCard(event.id, event.name, {});
        entry.progress.value = entry.progress.max;
        entry.status.textContent = event.result.decision + (event.result.is_error ? " · error" : "");
        entry.status.className = `badge ${event.result.is_error ? "bad" : "ok"}`;
        replace(entry.result, h("pre", { class: "output" }, withArtifactLinks(withoutRawData(event.result.text))));
        refreshArtifacts();
        break;
      }
      case "approval_needed":
        reply = null;
        conversation.append(h("p", { class: "notice warn" }, "Waiting for approval of ", h("code", {}, event.approval.tool),
          " — ", h("a", { href: "#/approvals" }, "decide in Approvals")));
        stateBadge.textContent = "waiting for approval";
        break;
      case "approval_decided":
        conversation.append(h("p", { class: "muted" }, `Decided: ${event.decision} by ${event.decided_by}`));
        stateBadge.textContent = "running";
        break;
      case "client_call_pending":
        conversation.append(h("p", { class: "notice warn" }, "Waiting for the client to run ", h("code", {}, event.call.tool)));
        stateBadge.textContent = "waiting for a client tool";
        break;
      case "run_finished":
        reply = null;
        stateBadge.textContent = "done";
        break;
      case "run_failed":
        stateBadge.textContent = "failed";
        conversation.append(notice("error", event.error));
        break;
      case "run_interrupted":
        stateBadge.textContent = "interrupted";
        break;
      default:
        break;
    }
  };
  follow(id, 0, onEvent, signal, (state) => { streamState.textContent = state; });
}

/** A size in bytes, in the unit that reads best. */
function bytes(count) {
  if (count < 1024) return `${count} B`;
  if (count < 1024 * 1024) return `${(count / 1024).toFixed(1)} KiB`;
  return `${(count / 1024 / 1024).toFixed(1)} MiB`;
}

/** One event in a few words, for the events list. */
function summary(event) {
  switch (event.type) {
    case "text_delta": return JSON.stringify(event.text);
    case "tool_call_started": case "tool_call_streaming": return event.name;
    case "tool_call_finished": return `${event.name}: ${event.result.decision}`;
    case "tool_progress": return [event.progress, event.total].filter((n) => n !== null && n !== undefined).join("/");
    case "approval_needed": return event.approval.tool;
    case "client_call_pending": return event.call.tool;
    case "run_failed": return event.error;
    case "turn_ended": return event.reason;
    case "warning": return event.message;
    default: return "";
  }
}
