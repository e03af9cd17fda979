// pages/audit.js: the tenant's audit records as a filterable, paged table (session, tool, source, decision, time range), and one record in full.

import { api } from "../api.js";
import { h, notice, prettyJson, replace, when } from "../dom.js";

const FIELDS = [
  ["session", "Session"],
  ["tool", "Tool"],
  ["source", "Source"],
  ["decision", "Decision"],
];

export async function show(main, _rest, signal) {
  const inputs = Object.fromEntries(FIELDS.map(([name]) => [name, h("input", { type: "text", name, id: `audit-${name}` })]));
  const since = h("input", { type: "datetime-local", name: "since", id: "audit-since" });
  const until = h("input", { type: "datetime-local", name: "until", id: "audit-until" });
  const rows = h("tbody");
  const detail = h("section", { id: "audit-record", "aria-label": "Record" });
  const status = h("div");
  const pager = h("div", { class: "actions" });
  // The cursors of the pages seen so far: page n starts after cursors[n].
  let cursors = [0];
  let page = 0;

  const query = () => {
    const params = new URLSearchParams();
    for (const [name] of FIELDS) if (inputs[name].value.trim()) params.set(name, inputs[name].value.trim());
    if (since.value) params.set("since", String(new Date(since.value).getTime()));
    if (until.value) params.set("until", String(new Date(until.value).getTime()));
    params.set("after", String(cursors[page]));
    params.set("limit", "25");
    return params.toString();
  };
  const load = async () => {
    const result = await api("GET", `/audit?${query()}`);
    cursors[page + 1] = result.next;
    replace(rows, result.records.length ? result.records.map((record) => h("tr", { dataset: { record: record.id } },
      h("td", {}, when(record.time_unix_ms, true)),
      h("td", {}, h("code", {}, record.session_id || "")),
      h("td", {}, h("code", {}, record.public_name || record.tool || "")),
      h("td", {}, record.source || ""),
      h("td", {}, h("span", { class: `badge decision-${record.decision}` }, record.decision || "")),
      h("td", {}, h("button", { type: "button", class: "link", onclick: () => replace(detail, h("h2", {}, `Record ${record.id}`), prettyJson(record)) }, "Show")))) :
      h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No records match.")));
    replace(pager,
      h("button", { type: "button", disabled: page === 0, onclick: () => { page -= 1; load().catch(fail); } }, "← Previous"),
      h("span", { class: "muted" }, ` page ${page + 1} `),
      h("button", { type: "button", disabled: result.records.length < 25, onclick: () => { page += 1; load().catch(fail); } }, "Next →"));
    replace(status);
  };
  const fail = (error) => replace(status, notice("error", error.message));
  const form = h("form", {
    class: "filters", id: "audit-filters", "aria-label": "Filter the audit",
    onsubmit: (event) => {
      event.preventDefault();
      cursors = [0];
      page = 0;
      replace(detail);
      load().catch(fail);
    },
  },
  FIELDS.map(([name, label]) => h("label", {}, label, inputs[name])),
  h("label", {}, "From", since),
  h("label", {}, "Until", until),
  h("button", { type: "submit" }, "Filter"));
  replace(main,
    h("h1", {}, "Audit"),
    h("p", { class: "muted" }, "Every call the gate decided for your tenant, oldest first."),
    form, status,
    h("table", { class: "grid", id: "audit" },
      h("thead", {}, h("tr", {}, h("th", {}, "Time"), h("th", {}, "Session"), h("th", {}, "Tool"), h("th", {}, "Source"), h("th", {}, "Decision"), h("th", {}, ""))),
      rows),
    pager, detail);
  void signal;
  await load();
}
