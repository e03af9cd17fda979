// api.js: the console's calls to warden's HTTP API, with the API key kept in this tab's session storage.

const KEY = "warden.console.key";

export function signedIn() {
  return sessionStorage.getItem(KEY) !== null;
}

export function signIn(key) {
  sessionStorage.setItem(KEY, key);
}

export function signOut() {
  sessionStorage.removeItem(KEY);
}

/** A refusal from the API: its status and one-line reason. */
export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

/** Calls the API: `api("GET", "/sessions")` answers the parsed JSON body (or null). */
export async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${sessionStorage.getItem(KEY) || ""}` };
  const init = { method, headers, cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(`/v1${path}`, init);
  const text = await response.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  if (!response.ok) {
    const reason = parsed && typeof parsed.error === "string" ? parsed.error : `${response.status} ${response.statusText}`;
    throw new ApiError(response.status, reason, parsed);
  }
  return parsed;
}

/**
 * Downloads a file the API serves (an artifact) with the key in a header: fetched as a blob and
 * saved under the name the service gives (else `filename`), never opened in the console's origin.
 */
export async function download(path, filename) {
  const response = await fetch(`/v1${path}`, {
    headers: { Authorization: `Bearer ${sessionStorage.getItem(KEY) || ""}` },
    cache: "no-store",
  });
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    throw new ApiError(response.status, body.error || `${response.status} ${response.statusText}`, body);
  }
  const named = /filename="([^"]+)"/.exec(response.headers.get("Content-Disposition") || "");
  const url = URL.createObjectURL(await response.blob());
  const link = document.createElement("a");
  link.href = url;
  link.download = named ? named[1] : filename;
  link.rel = "noopener";
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/**
 * Follows a session's events (Server-Sent Events over fetch, so the key goes in a header):
 * calls `onEvent(seq, event)` for each, resumes from the last id when the stream ends, until
 * `signal` aborts. `onState("live"|"idle"|"error: …")` says how the stream is.
 */
export async function follow(session, after, onEvent, signal, onState = () => {}) {
  let last = after;
  while (!signal.aborted) {
    try {
      const response = await fetch(`/v1/sessions/${encodeURIComponent(session)}/events/stream?after=${last}`, {
        headers: { Authorization: `Bearer ${sessionStorage.getItem(KEY) || ""}` },
        cache: "no-store",
        signal,
      });
      if (!response.ok) {
        const body = await response.json().catch(() => ({}));
        onState(`error: ${body.error || response.status}`);
        return;
      }
      onState("live");
      await readEvents(response, (id, event) => {
        if (id === null) return;
        last = id;
        onEvent(id, event);
      });
      onState("idle");
    } catch (error) {
      if (signal.aborted) return;
      onState(`error: ${error.message}`);
    }
    // No run is going: look again shortly for the next one.
    await new Promise((resolve) => setTimeout(resolve, 1500));
  }
}

/**
 * Reads a Server-Sent Events body to its end: `onEvent(id, data)` for each event with JSON data
 * (`id` null when it has none); an event that cannot be parsed or shown is skipped with a warning.
 */
async function readEvents(response, onEvent) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let id = null;
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("id:")) id = Number(line.slice(3).trim());
        else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
      }
      if (data.length === 0) continue;
      try {
        onEvent(id, JSON.parse(data.join("\n")));
      } catch (error) {
        console.warn("an event could not be shown", error);
      }
    }
  }
}

/** How long the console waits, while the tenant's stream is down, before it connects again. */
const WATCH_RETRY_MS = 10_000;

/**
 * Follows the tenant's activity (`GET /v1/events/stream`) until `signal` aborts: `onChange(event)`
 * for each event — `ready` when the stream (re)connects, so a page loads its list afresh — and,
 * while the stream cannot be had, `{type: "stream_down"}` before each retry: a slow refresh in
 * its place.
 */
export async function watchTenant(onChange, signal) {
  while (!signal.aborted) {
    try {
      const response = await fetch("/v1/events/stream", {
        headers: { Authorization: `Bearer ${sessionStorage.getItem(KEY) || ""}` },
        cache: "no-store",
        signal,
      });
      if (response.ok) await readEvents(response, (_id, event) => onChange(event));
    } catch (error) {
      if (signal.aborted) return;
      console.warn("the tenant's event stream failed", error);
    }
    if (signal.aborted) return;
    onChange({ type: "stream_down" });
    await new Promise((resolve) => setTimeout(resolve, WATCH_RETRY_MS));
  }
}
