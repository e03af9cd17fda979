// pages/skills.js: the tenant's skills: list, view and edit a SKILL.md (checked by the service as a local one is, an error shown at its line), create, and delete (naming the agent profiles that use it).

import { api, ApiError } from "../api.js";
import { h, notice, replace, when } from "../dom.js";

const TEMPLATE = "---\nname: NAME\ndescription: What the skill is for, and when to use it.\n---\n\n# NAME\n\nSteps the agent follows.\n";

export async function show(main, [name], signal) {
  void signal;
  if (name !== undefined) return editor(main, name);
  const { skills } = await api("GET", "/skills");
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
    }, h("label", {}, "New skill ", newName), h("button", { type: "submit" }, "Create")));
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
