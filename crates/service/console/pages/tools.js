// pages/tools.js: every tool an agent profile's sessions are offered, with its source (code, built-in, client, MCP server), effect, required permission, timeout and approval. The console shows tools; agent profiles are defined in the configuration, never here.

import { api, ApiError } from "../api.js";
import { h, notice, replace } from "../dom.js";

export async function show(main, [agent], signal) {
  void signal;
  const field = h("input", { type: "text", name: "agent", id: "tools-agent", value: agent || "", placeholder: "(default agent)", "aria-label": "Agent profile" });
  const body = h("section", { id: "tools" });
  replace(main,
    h("h1", {}, "Tools"),
    h("p", { class: "muted" }, "The tools an agent profile's sessions are offered. Which tools a profile has is set in its [agents.NAME] configuration."),
    h("form", {
      class: "inline", "aria-label": "Agent profile", onsubmit: (event) => {
        event.preventDefault();
        location.hash = `#/tools/${encodeURIComponent(field.value.trim())}`;
      },
    }, h("label", {}, "Agent ", field), h("button", { type: "submit" }, "Show")),
    body);
  try {
    const query = agent ? `?agent=${encodeURIComponent(agent)}` : "";
    const { tools } = await api("GET", `/tools${query}`);
    replace(body, h("table", { class: "grid", id: "tools-table" },
      h("thead", {}, h("tr", {}, ["Tool", "Source", "Effect", "Permission", "Timeout", "Approval"].map((title) => h("th", {}, title)))),
      h("tbody", {}, tools.length ? tools.map((tool) => h("tr", { dataset: { tool: tool.name } },
        h("td", {}, h("code", {}, tool.name), tool.description ? h("div", { class: "muted" }, tool.description) : null),
        h("td", {}, h("span", { class: "badge" }, tool.source), tool.server ? h("div", { class: "muted" }, tool.server) : null),
        h("td", {}, tool.effect ? h("span", { class: `badge class-${tool.effect}` }, tool.effect) : null,
          (tool.classes || []).filter((cls) => cls !== tool.effect).map((cls) => h("span", { class: `badge class-${cls}` }, cls))),
        h("td", {}, tool.required_permission || ""),
        h("td", {}, tool.timeout_sec !== undefined && tool.timeout_sec !== null ? `${tool.timeout_sec} s` : ""),
        h("td", {}, tool.requires_approval ? h("span", { class: "badge warn" }, "asks every call") : "by policy")))
        : h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No tools.")))));
  } catch (error) {
    if (error instanceof ApiError && error.status === 404 && /endpoint/.test(error.message)) {
      replace(body, h("p", { class: "muted" }, "This service does not list its tools."));
    } else {
      replace(body, notice("error", error.message));
    }
  }
}
