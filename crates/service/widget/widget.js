// widget.js: warden's embeddable chat widget. One script tag on a product's page opens a chat panel (in a shadow root, isolated from the page's CSS) talking to one agent profile with a short-lived widget token; replies stream as safe markdown (text nodes only), tool activity shows with progress, and client-side tools run in the page through handlers registered with `warden.tool(name, handler)`.
//
//   <script src="https://warden.example/widget.js" data-agent="support" data-token="wwt_…"></script>
//   <script>warden.tool("open_order", async ({ id }) => ({ status: "shipped" }));</script>
(() => {
  "use strict";
  const script = document.currentScript;
  if (!script || window.warden) return;
  const base = new URL(script.src, location.href).origin;
  const agent = script.dataset.agent || "";
  let token = script.dataset.token || "";
  const title = script.dataset.title || "Chat";
  const handlers = new Map();

  // ---- a small safe markdown renderer: DOM nodes and text nodes, never markup ----
  const el = (tag, attributes, ...children) => {
    const element = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
      else if (value !== false && value !== null && value !== undefined) element.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      element.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return element;
  };
  const safeLink = (href) => {
    try {
      const url = new URL(href);
      return url.protocol === "https:" || url.protocol === "http:" ? url.href : null;
    } catch {
      return null;
    }
  };
  // Inline: `code`, **bold**, *italic* (never `_`: identifiers such as window.__x stay as they are), [label](http(s) URL).
  const INLINE = /(`[^`\n]+`)|(\*\*[^*\n]+\*\*)|(\*[^*\s\n][^*\n]*\*)|(\[[^\]\n]+\]\([^)\s]+\))/;
  function inline(text, parent) {
    let rest = text;
    while (rest) {
      const found = INLINE.exec(rest);
      if (!found) {
        parent.append(document.createTextNode(rest));
        break;
      }
      if (found.index > 0) parent.append(document.createTextNode(rest.slice(0, found.index)));
      const token = found[0];
      if (found[1]) parent.append(el("code", {}, token.slice(1, -1)));
      else if (found[2]) inline(token.slice(2, -2), parent.appendChild(el("strong")));
      else if (found[3]) inline(token.slice(1, -1), parent.appendChild(el("em")));
      else {
        const [, label, href] = /^\[([^\]]+)\]\(([^)\s]+)\)$/.exec(token);
        const safe = safeLink(href);
        if (safe) inline(label, parent.appendChild(el("a", { href: safe, target: "_blank", rel: "noopener noreferrer" })));
        else parent.append(document.createTextNode(token));
      }
      rest = rest.slice(found.index + token.length);
    }
    return parent;
  }
  function markdown(text) {
    const out = document.createDocumentFragment();
    const lines = text.split("\n");
    let index = 0;
    while (index < lines.length) {
      const line = lines[index];
      if (/^```/.test(line)) {
        const code = [];
        index += 1;
        while (index < lines.length && !/^```/.test(lines[index])) code.push(lines[index++]);
        index += 1;
        out.append(el("pre", {}, el("code", {}, code.join("\n"))));
      } else if (/^\s*([-*]|\d+\.)\s+/.test(line)) {
        const ordered = /^\s*\d+\./.test(line);
        const list = el(ordered ? "ol" : "ul");
        while (index < lines.length && /^\s*([-*]|\d+\.)\s+/.test(lines[index])) {
          list.append(inline(lines[index].replace(/^\s*([-*]|\d+\.)\s+/, ""), el("li")));
          index += 1;
        }
        out.append(list);
      } else if (line.trim() === "") {
        index += 1;
      } else {
        const paragraph = [];
        while (index < lines.length && lines[index].trim() !== "" && !/^```/.test(lines[index]) && !/^\s*([-*]|\d+\.)\s+/.test(lines[index])) {
          paragraph.push(lines[index++]);
        }
        out.append(inline(paragraph.join("\n"), el("p")));
      }
    }
    return out;
  }

  // ---- the panel, in a shadow root ----
  const CSS = `
:host { all: initial; position: fixed; z-index: 2147483000; right: 1.25rem; bottom: 1.25rem;
  font: 15px/1.45 var(--warden-font, system-ui, -apple-system, "Segoe UI", sans-serif); color: var(--warden-text, #1d2330); }
.launcher { background: var(--warden-accent, #2d5bd7); color: var(--warden-accent-text, #fff); border: none; border-radius: 999px;
  padding: .7rem 1.2rem; font: inherit; font-weight: 600; cursor: pointer; box-shadow: 0 4px 14px rgba(0,0,0,.2); }
.panel { display: none; flex-direction: column; width: var(--warden-width, 23rem); height: var(--warden-height, 32rem); max-height: calc(100vh - 2.5rem);
  background: var(--warden-bg, #fff); border-radius: var(--warden-radius, 12px); box-shadow: 0 10px 40px rgba(0,0,0,.25); overflow: hidden; }
:host([open]) .panel { display: flex; }
:host([open]) .launcher { display: none; }
header { display: flex; align-items: center; justify-content: space-between; padding: .6rem .9rem; background: var(--warden-accent, #2d5bd7); color: var(--warden-accent-text, #fff); font-weight: 600; }
header button { background: none; border: none; color: inherit; font: inherit; font-size: 1.2rem; cursor: pointer; line-height: 1; }
.log { flex: 1; overflow-y: auto; padding: .8rem; display: flex; flex-direction: column; gap: .5rem; }
.message { max-width: 85%; padding: .45rem .7rem; border-radius: var(--warden-radius, 12px); word-wrap: break-word; }
.message p { margin: 0 0 .4rem; } .message p:last-child { margin-bottom: 0; }
.message ul, .message ol { margin: .2rem 0 .4rem; padding-left: 1.2rem; }
.message pre { background: rgba(0,0,0,.06); padding: .4rem .5rem; border-radius: 6px; overflow-x: auto; margin: .3rem 0; }
.message code { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: .9em; }
.message a { color: var(--warden-link, var(--warden-accent, #2d5bd7)); }
.user { align-self: flex-end; background: var(--warden-user-bg, var(--warden-accent, #2d5bd7)); color: var(--warden-user-text, #fff); white-space: pre-wrap; }
.assistant { align-self: flex-start; background: var(--warden-assistant-bg, #eef1f5); }
.activity { align-self: flex-start; font-size: .85rem; color: var(--warden-muted, #5f6b7a); display: flex; gap: .4rem; align-items: center; }
.activity progress { width: 6rem; accent-color: var(--warden-accent, #2d5bd7); }
.error { align-self: stretch; font-size: .85rem; color: var(--warden-error, #b3261e); }
form { display: flex; gap: .4rem; padding: .6rem; border-top: 1px solid rgba(0,0,0,.1); }
textarea { flex: 1; resize: none; font: inherit; padding: .4rem .5rem; border: 1px solid rgba(0,0,0,.2); border-radius: 8px; background: var(--warden-input-bg, #fff); color: inherit; }
form button { background: var(--warden-accent, #2d5bd7); color: var(--warden-accent-text, #fff); border: none; border-radius: 8px; padding: 0 .9rem; font: inherit; cursor: pointer; }
form button:disabled { opacity: .5; cursor: default; }
button:focus-visible, textarea:focus-visible, a:focus-visible { outline: 2px solid var(--warden-focus, #f0a500); outline-offset: 2px; }
`;
  const host = document.createElement("warden-chat");
  const root = host.attachShadow({ mode: "open" });
  if ("adoptedStyleSheets" in root && typeof CSSStyleSheet === "function" && "replaceSync" in CSSStyleSheet.prototype) {
    // A constructed stylesheet needs no inline <style> a host page's policy could forbid.
    const sheet = new CSSStyleSheet();
    sheet.replaceSync(CSS);
    root.adoptedStyleSheets = [sheet];
  } else {
    root.append(el("style", {}, CSS));
  }
  const log = el("div", { class: "log", role: "log", "aria-live": "polite", "aria-label": "Conversation" });
  const input = el("textarea", { rows: 2, "aria-label": "Your message", placeholder: "Write a message…" });
  const send = el("button", { type: "submit" }, "Send");
  const launcher = el("button", { class: "launcher", type: "button", "aria-haspopup": "dialog", "aria-expanded": "false" }, title);
  const close = el("button", { type: "button", "aria-label": "Close the chat" }, "×");
  const panel = el("section", { class: "panel", role: "dialog", "aria-label": title },
    el("header", {}, el("span", {}, title), close),
    log,
    el("form", { onsubmit: (event) => { event.preventDefault(); submit(); } }, input, send));
  root.append(launcher, panel);

  const open = () => {
    host.setAttribute("open", "");
    launcher.setAttribute("aria-expanded", "true");
    input.focus();
  };
  const shut = () => {
    host.removeAttribute("open");
    launcher.setAttribute("aria-expanded", "false");
    launcher.focus();
  };
  launcher.addEventListener("click", open);
  close.addEventListener("click", shut);
  panel.addEventListener("keydown", (event) => {
    if (event.key === "Escape") shut();
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      submit();
    }
  });
  const show = (node) => {
    log.append(node);
    log.scrollTop = log.scrollHeight;
    return node;
  };
  const fail = (text) => show(el("div", { class: "error", role: "alert" }, text));

  // ---- the service ----
  async function call(method, path, body) {
    const init = { method, headers: { Authorization: `Bearer ${token}` }, mode: "cors", credentials: "omit", cache: "no-store" };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(`${base}/v1${path}`, init);
    const parsed = await response.json().catch(() => null);
    if (!response.ok) throw new Error((parsed && parsed.error) || `the chat service answered ${response.status}`);
    return parsed;
  }

  /** The tab remembers its session (an id, not a secret) across the product's pages. */
  const STORE = `warden.widget.session:${agent}`;
  let session = null;
  let busy = false;
  const answered = new Set();

  async function answerClientCall(pending) {
    if (answered.has(pending.id)) return;
    answered.add(pending.id);
    const handler = handlers.get(pending.tool);
    let answer;
    if (!handler) {
      answer = { error: `the tool ${pending.tool} is unavailable in this page (no handler is registered for it)` };
    } else {
      try {
        const result = await handler(pending.arguments || {});
        answer = { result: result === undefined ? null : result };
      } catch (error) {
        answer = { error: String((error && error.message) || error) };
      }
    }
    await call("POST", `/sessions/${encodeURIComponent(session)}/client-calls/${encodeURIComponent(pending.id)}`, answer);
  }

  // What the panel shows of the run being followed: the reply being written, each tool's activity.
  const view = { reply: null, text: "", activities: new Map() };

  /** Shows one event; `live` runs client-side tools (a replayed event only shows). Whether the run ended. */
  function render(event, live) {
    switch (event.type) {
      case "run_started":
        view.reply = null;
        if (!live) show(el("div", { class: "message user" }, event.message));
        return false;
      case "text_delta":
        if (!view.reply) {
          view.reply = show(el("div", { class: "message assistant" }));
          view.text = "";
        }
        view.text += event.text;
        view.reply.replaceChildren(markdown(view.text));
        log.scrollTop = log.scrollHeight;
        return false;
      case "tool_call_started": {
        view.reply = null;
        const progress = el("progress", { "aria-label": `progress of ${event.name}` });
        const label = el("span", {}, `Working: ${event.name}…`);
        view.activities.set(event.id, { progress, label, name: event.name });
        show(el("div", { class: "activity", role: "status" }, label, progress));
        return false;
      }
      case "tool_progress": {
        const activity = view.activities.get(event.id);
        if (activity && typeof event.progress === "number") {
          activity.progress.max = event.total > 0 ? event.total : Math.max(event.progress, 1);
          activity.progress.value = event.progress;
        }
        if (activity && event.message) activity.label.textContent = `${activity.name}: ${event.message}`;
        return false;
      }
      case "tool_call_finished": {
        const activity = view.activities.get(event.id);
        if (activity) {
          activity.progress.max = 1;
          activity.progress.value = 1;
          activity.label.textContent = `${event.name}: ${event.result.is_error ? "failed" : "done"}`;
        }
        return false;
      }
      case "client_call_pending":
        if (live) answerClientCall(event.call).catch((error) => fail(error.message));
        return false;
      case "run_failed":
        fail(`The assistant could not answer: ${event.error}`);
        return true;
      case "run_finished":
      case "run_interrupted":
        view.reply = null;
        return true;
      default:
        return false;
    }
  }

  /** Follows the session's events after cursor `after` until its run ends. */
  async function follow(after) {
    let last = after;
    for (let attempt = 0; attempt < 5; attempt += 1) {
      const response = await fetch(`${base}/v1/sessions/${encodeURIComponent(session)}/events/stream?after=${last}`, {
        headers: { Authorization: `Bearer ${token}` }, mode: "cors", credentials: "omit", cache: "no-store",
      });
      if (!response.ok) throw new Error(`the chat service answered ${response.status}`);
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          let id = null;
          let data = "";
          for (const line of block.split("\n")) {
            if (line.startsWith("id:")) id = Number(line.slice(3).trim());
            else if (line.startsWith("data:")) data += line.slice(5).trimStart();
          }
          if (id === null || !data) continue;
          last = id;
          if (render(JSON.parse(data), true)) return;
        }
      }
    }
  }

  /**
   * After the page loads again with the same token: the conversation of the session this tab
   * had is shown again, its client calls still waiting are answered here, and a run still going
   * is followed. A session the token cannot reach (a new token) is forgotten.
   */
  async function resume() {
    const saved = sessionStorage.getItem(STORE);
    if (!saved || !token) return;
    session = saved;
    let after = 0;
    let going = false;
    try {
      for (;;) {
        const page = await call("GET", `/sessions/${encodeURIComponent(session)}/events?after=${after}&limit=500`);
        for (const { event } of page.events) {
          if (event.type === "run_started" || event.type === "run_resumed") going = true;
          if (render(event, false)) going = false;
        }
        if (page.events.length === 0 || page.next === after) break;
        after = page.next;
      }
      const { client_calls: pending } = await call("GET", `/sessions/${encodeURIComponent(session)}/client-calls`);
      for (const waiting of pending) answerClientCall(waiting).catch((error) => fail(error.message));
      if (going) {
        busy = true;
        send.disabled = true;
        await follow(after);
      }
    } catch {
      sessionStorage.removeItem(STORE);
      session = null;
      log.replaceChildren();
    } finally {
      busy = false;
      send.disabled = false;
    }
  }

  async function submit() {
    const message = input.value.trim();
    if (!message || busy) return;
    if (!token) {
      fail("The chat is not configured: no token.");
      return;
    }
    busy = true;
    send.disabled = true;
    input.value = "";
    show(el("div", { class: "message user" }, message));
    try {
      if (!session) {
        session = (await call("POST", "/sessions", agent ? { agent } : {})).id;
        sessionStorage.setItem(STORE, session);
      }
      const accepted = await call("POST", `/sessions/${encodeURIComponent(session)}/messages`, { text: message });
      await follow(accepted.events_after);
    } catch (error) {
      fail(error.message);
    } finally {
      busy = false;
      send.disabled = false;
      input.focus();
    }
  }

  window.warden = Object.freeze({
    /** Registers the handler of a client-side tool: `async (args) => result`; a throw answers an error. */
    tool(name, handler) {
      if (typeof name !== "string" || typeof handler !== "function") throw new TypeError("warden.tool(name, async (args) => result)");
      handlers.set(name, handler);
    },
    /** Replaces the widget token (the product mints a new one before the old expires). */
    setToken(next) {
      if (next !== token) {
        session = null;
        sessionStorage.removeItem(STORE);
      }
      token = String(next || "");
    },
    open,
    close: shut,
  });
  const mount = () => {
    document.body.append(host);
    resume();
  };
  if (document.body) mount();
  else document.addEventListener("DOMContentLoaded", mount);
})();
