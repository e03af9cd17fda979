// pages/servers.js: the MCP servers a tenant's sessions reach — each one's state, protocol, tool count and last failure with its stderr tail — and the remote servers a tenant admin registered (add, replace, remove).

import { api, ApiError } from "../api.js";
import { h, notice, replace, when } from "../dom.js";

/** A tenant admin signs in to a registered server with OAuth: the authorization page opens in a new tab. */
function signIn(name) {
  const status = h("span", { class: "muted" });
  return h("div", { class: "actions" }, h("button", {
    type: "button", onclick: async () => {
      try {
        const started = await api("POST", `/servers/${encodeURIComponent(name)}/login`);
        const url = new URL(started.authorization_url);
        if (url.protocol !== "https:" && url.protocol !== "http:") throw new Error("the authorization URL is not http(s)");
        window.open(url.href, "_blank", "noopener,noreferrer");
        status.textContent = "Finish signing in in the new tab, then Refresh.";
      } catch (error) {
        status.textContent = error.message;
      }
    },
  }, `Sign in to ${name}`), status);
}

export async function show(main, _rest, signal) {
  void signal;
  const status = h("div", { id: "servers-status" });
  const live = h("section", { id: "server-status", "aria-label": "Server status" });
  const registered = h("section", { id: "registered-servers", "aria-label": "Registered servers" });
  replace(main,
    h("h1", {}, "Servers"),
    h("div", { class: "actions" }, h("button", { type: "button", id: "refresh-servers", onclick: () => load().catch(fail) }, "Refresh")),
    status, live, registered);
  const fail = (error) => replace(status, notice("error", error.message));

  const load = async () => {
    replace(status);
    try {
      const { servers } = await api("GET", "/servers/status");
      replace(live, h("h2", {}, "Reached by your sessions"),
        h("table", { class: "grid", id: "server-status-table" },
          h("thead", {}, h("tr", {}, ["Server", "Origin", "State", "Protocol", "Tools", "Last failure"].map((title) => h("th", {}, title)))),
          h("tbody", {}, servers.length ? servers.map((server) => h("tr", { dataset: { server: server.name } },
            h("td", {}, h("code", {}, server.name), server.server ? h("div", { class: "muted" }, server.server) : null),
            h("td", {}, server.origin, server.transport ? h("div", { class: "muted" }, server.transport) : null),
            h("td", {}, h("span", { class: `badge ${server.failure ? "bad" : server.state === "connected" ? "ok" : "warn"}` }, server.state)),
            h("td", {}, server.protocol || ""),
            h("td", {}, server.tools ?? ""),
            h("td", {}, server.failure ? h("details", {}, h("summary", {}, server.failure),
              h("pre", { class: "output" }, (server.stderr_tail || []).length ? server.stderr_tail.join("\n") : "(no stderr)")) : "",
              server.origin === "tenant" && /login/.test(server.state) ? signIn(server.name) : null)))
            : h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No servers.")))));
    } catch (error) {
      if (!(error instanceof ApiError && (error.status === 404 || error.status === 405))) throw error;
      replace(live, h("h2", {}, "Reached by your sessions"), h("p", { class: "muted" }, "This service does not report its servers' status."));
    }
    const { servers } = await api("GET", "/servers");
    const name = h("input", { type: "text", name: "name", required: true, "aria-label": "Server name" });
    const url = h("input", { type: "url", name: "url", required: true, placeholder: "https://mcp.example.com/mcp", "aria-label": "Server URL" });
    replace(registered, h("h2", {}, "Registered by a tenant admin"),
      h("table", { class: "grid" },
        h("thead", {}, h("tr", {}, ["Server", "URL", "Headers", "Registered", ""].map((title) => h("th", {}, title)))),
        h("tbody", {}, servers.length ? servers.map((server) => h("tr", {},
          h("td", {}, h("code", {}, server.name)),
          h("td", {}, server.url),
          h("td", {}, Object.entries(server.headers).map(([header, value]) => h("div", {}, h("code", {}, `${header}: ${value}`)))),
          h("td", {}, when(server.created_at)),
          h("td", {}, h("button", {
            type: "button", class: "deny", onclick: async () => {
              try {
                await api("DELETE", `/servers/${encodeURIComponent(server.name)}`);
                await load();
              } catch (error) { fail(error); }
            },
          }, "Remove"))))
          : h("tr", {}, h("td", { colspan: 5, class: "muted" }, "None registered.")))),
      h("form", {
        class: "inline", "aria-label": "Register a server", onsubmit: async (event) => {
          event.preventDefault();
          try {
            await api("PUT", `/servers/${encodeURIComponent(name.value.trim())}`, { url: url.value.trim() });
            await load();
          } catch (error) { fail(error); }
        },
      }, h("label", {}, "Name ", name), h("label", {}, "URL ", url), h("button", { type: "submit" }, "Register")),
      h("p", { class: "muted" }, "Only a tenant admin's key registers servers; header values name environment variables (${env:NAME}), never a secret."));
  };
  await load();
}
