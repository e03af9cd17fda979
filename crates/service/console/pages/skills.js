// pages/skills.js: the tenant's skills: list, view and edit a SKILL.md (checked by the service as a local one is, an error shown at its line), create, and delete (naming the agent profiles that use it); and the prompt snapshots a tenant admin copied in from a server.

import { api, ApiError } from "../api.js";
import { h, notice, replace, when } from "../dom.js";

const TEMPLATE = "---\nname: NAME\ndescription: What the skill is for, and when to use it.\n---\n\n# NAME\n\nSteps the agent follows.\n";

export async function show(main, [name, more], signal) {
  void signal;
  if (name === "~prompt" && more !== undefined) return promptView(main, more);
  if (name !== undefined) return editor(main, name);
  const { skills } = await api("GET", "/skills");
  const prompts = h("section", { id: "prompts", "aria-label": "Prompt snapshots" });
  const newName = h("input", { type: "text", id: "new-skill", name: "name", required: true, pattern: "[a-z0-9][a-z0-9-]*", "aria-label": "New skill's name" });
  replace(main,
    h("h1", {}, "Skills"),
    h("p", { class: "muted" }, "Your tenant's skills: the agents of your sessions discover them as they do local ones."),
    h("table", { class: "grid", id: "skills" },
      h("thead", {}, h("tr", {}, h("th", {}, "Skill"), h("th", {}, "Description"), h("th", {}, "Changed"))),
      h("tbody", {}, skills.length ? skills.map((skill) => h("tr", {},
        h("td", {}, h("a", { href: `#/skills/${encodeURIComponent(skill.name)}` }, skill.name)),
        h("td", {}, skill.description),
        h("td", {}, when(skill.updated_at)))) :
        h("tr", {}, h("td", { colspan: 3, class: "muted" }, "No skills yet.")))),
    h("form", {
      class: "inline", "aria-label": "New skill", onsubmit: (event) => {
        event.preventDefault();
        location.hash = `#/skills/${encodeURIComponent(newName.value.trim())}/new`;
      },
    }, h("label", {}, "New skill ", newName), h("button", { type: "submit" }, "Create")),
    prompts);
  await promptList(prompts);
}

/** The tenant's prompt snapshots, and the form that copies one in from a server. */
async function promptList(section) {
  let list;
  try {
    ({ prompts: list } = await api("GET", "/prompts"));
  } catch (error) {
    if (error instanceof ApiError && (error.status === 404 || error.status === 405)) {
      replace(section);
      return;
    }
    throw error;
  }
  const status = h("div", { id: "prompt-status" });
  const name = h("input", { type: "text", name: "name", required: true, "aria-label": "Snapshot name" });
  const server = h("input", { type: "text", name: "server", required: true, "aria-label": "Server" });
  const prompt = h("input", { type: "text", name: "prompt", required: true, "aria-label": "Prompt on the server" });
  const args = h("textarea", { name: "arguments", rows: 2, placeholder: "name=value, one a line", "aria-label": "Arguments" });
  replace(section,
    h("h2", {}, "Prompt snapshots"),
    h("p", { class: "muted" }, "Prompts copied in from a server once, by a tenant admin: sessions only ever see the copy."),
    h("table", { class: "grid", id: "prompt-snapshots" },
      h("thead", {}, h("tr", {}, ["Snapshot", "Copied from", "Copied by", "When"].map((title) => h("th", {}, title)))),
      h("tbody", {}, list.length ? list.map((row) => h("tr", {},
        h("td", {}, h("a", { href: `#/skills/~prompt/${encodeURIComponent(row.name)}` }, row.name), row.description ? h("div", { class: "muted" }, row.description) : null),
        h("td", {}, h("code", {}, `${row.server} / ${row.prompt}`)),
        h("td", {}, row.copied_by),
        h("td", {}, when(row.created_at)))) :
        h("tr", {}, h("td", { colspan: 4, class: "muted" }, "No prompt snapshots.")))),
    h("form", {
      class: "inline", "aria-label": "Copy a prompt in", onsubmit: async (event) => {
        event.preventDefault();
        const argumentsMap = {};
        for (const line of args.value.split("\n").map((each) => each.trim()).filter(Boolean)) {
          const at = line.indexOf("=");
          if (at > 0) argumentsMap[line.slice(0, at).trim()] = line.slice(at + 1).trim();
        }
        try {
          await api("PUT", `/prompts/${encodeURIComponent(name.value.trim())}`, { server: server.value.trim(), prompt: prompt.value.trim(), arguments: argumentsMap });
          await promptList(section);
        } catch (error) {
          replace(status, notice("error", error.message));
        }
      },
    }, h("label", {}, "Name ", name), h("label", {}, "Server ", server), h("label", {}, "Prompt ", prompt),
    h("label", {}, "Arguments ", args), h("button", { type: "submit" }, "Copy in")),
    status);
}

/** One prompt snapshot: its messages as text. */
async function promptView(main, name) {
  const row = await api("GET", `/prompts/${encodeURIComponent(name)}`);
  const status = h("div");
  replace(main,
    h("p", {}, h("a", { href: "#/skills" }, "← Skills")),
    h("h1", {}, "Prompt snapshot ", h("code", {}, row.name)),
    h("p", { class: "muted" }, `Copied from ${row.server} / ${row.prompt} by ${row.copied_by} · ${when(row.created_at)}`),
    row.description ? h("p", {}, row.description) : null,
    Object.keys(row.arguments || {}).length ? h("p", {}, "Arguments: ", Object.entries(row.arguments).map(([key, value]) => h("code", { class: "badge" }, `${key}=${value}`))) : null,
    h("div", { class: "conversation" }, row.messages.map((message) =>
      h("div", { class: `message ${message.role === "assistant" ? "assistant" : "user"}` }, h("div", { class: "who" }, message.role), h("div", { class: "text" }, message.text)))),
    status,
    h("div", { class: "actions" }, h("button", {
      type: "button", class: "deny", onclick: async () => {
        try {
          await api("DELETE", `/prompts/${encodeURIComponent(name)}`);
          location.hash = "#/skills";
        } catch (error) {
          replace(status, notice("error", error.message));
        }
      },
    }, "Delete")));
}

/** The line an error names ("… line 3: …"), if any. */
function errorLine(message) {
  const found = /\bline (\d+)\b/.exec(message);
  return found ? Number(found[1]) : null;
}

async function editor(main, name) {
  const creating = location.hash.endsWith("/new");
  let text = TEMPLATE.replaceAll("NAME", name);
  if (!creating) {
    ({ text } = await api("GET", `/skills/${encodeURIComponent(name)}`));
  }
  const area = h("textarea", { id: "skill-text", name: "text", rows: 22, spellcheck: "false", "aria-label": `SKILL.md of ${name}`, "aria-describedby": "skill-status" });
  area.value = text;
  const gutter = h("ol", { class: "gutter", "aria-hidden": "true" });
  const status = h("div", { id: "skill-status" });
  const numberLines = (marked) => {
    const count = area.value.split("\n").length;
    replace(gutter, Array.from({ length: count }, (_, index) =>
      h("li", { class: index + 1 === marked ? "error-line" : "" }, String(index + 1))));
  };
  area.addEventListener("input", () => numberLines(null));
  area.addEventListener("scroll", () => { gutter.scrollTop = area.scrollTop; });
  const save = async () => {
    try {
      await api("PUT", `/skills/${encodeURIComponent(name)}`, { text: area.value });
      numberLines(null);
      replace(status, notice("ok", `Saved ${name}.`));
      if (creating) history.replaceState(null, "", `#/skills/${encodeURIComponent(name)}`);
    } catch (error) {
      const line = error instanceof ApiError ? errorLine(error.message) : null;
      numberLines(line);
      replace(status, notice("error", error.message));
      if (line) {
        // Put the cursor on the line the service named.
        const lines = area.value.split("\n");
        const start = lines.slice(0, line - 1).reduce((sum, each) => sum + each.length + 1, 0);
        area.focus();
        area.setSelectionRange(start, start + (lines[line - 1] || "").length);
      }
    }
  };
  const remove = async (force) => {
    try {
      await api("DELETE", `/skills/${encodeURIComponent(name)}${force ? "?force=true" : ""}`);
      location.hash = "#/skills";
    } catch (error) {
      if (error instanceof ApiError && error.status === 409 && error.body && error.body.profiles) {
        replace(status,
          notice("error", `Agent profiles name this skill: ${error.body.profiles.join(", ")}. Deleting it makes them fail to open.`),
          h("button", { type: "button", class: "deny", onclick: () => remove(true) }, "Delete anyway"));
      } else {
        replace(status, notice("error", error.message));
      }
    }
  };
  replace(main,
    h("p", {}, h("a", { href: "#/skills" }, "← Skills")),
    h("h1", {}, creating ? "New skill " : "Skill ", h("code", {}, name)),
    h("div", { class: "editor" }, gutter, area),
    status,
    h("div", { class: "actions" },
      h("button", { type: "button", id: "save-skill", onclick: save }, "Save"),
      creating ? null : h("button", { type: "button", class: "deny", onclick: () => remove(false) }, "Delete")));
  numberLines(null);
}
