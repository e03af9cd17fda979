// pages/grants.js: the operator's grants — server skills approved to use their tools, and skills allowed to run scripts (with expiry) — each revocable. An operator's key only.

import { api, ApiError } from "../api.js";
import { h, notice, replace, when } from "../dom.js";

export async function show(main, _rest, signal) {
  void signal;
  const status = h("div", { id: "grants-status" });
  const body = h("div");
  replace(main,
    h("h1", {}, "Grants"),
    h("p", { class: "muted" }, "What the operator granted on this machine (warden skills grants, warden skills script-grants). Revoking one makes the next session ask again."),
    status, body);
  const revoke = (path, what) => async () => {
    try {
      await api("DELETE", path);
      await load();
      replace(status, notice("ok", `Revoked ${what}.`));
    } catch (error) {
      replace(status, notice("error", error.message));
    }
  };
  const load = async () => {
    let grants;
    try {
      grants = await api("GET", "/grants");
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) {
        replace(body, h("p", { class: "muted" }, "Grants are the operator's: sign in with an operator's key to see them."));
        return;
      }
      throw error;
    }
    const now = Date.now() / 1000;
    replace(body,
      h("h2", {}, "Skill grants"),
      h("table", { class: "grid", id: "skill-grants" },
        h("thead", {}, h("tr", {}, ["Server", "Skill", "Tools", "Approved", ""].map((title) => h("th", {}, title)))),
        h("tbody", {}, grants.skill_grants.length ? grants.skill_grants.map((grant) => h("tr", {},
          h("td", {}, h("code", {}, grant.server)),
          h("td", {}, h("code", {}, grant.resource_uri)),
          h("td", {}, grant.tools.map((tool) => h("span", { class: "badge" }, tool))),
          h("td", {}, when(grant.approved_at)),
          h("td", {}, h("button", {
            type: "button", class: "deny",
            onclick: revoke(`/grants/skills/${encodeURIComponent(grant.server)}/${encodeURIComponent(grant.resource_uri)}`, grant.resource_uri),
          }, "Revoke"))))
          : h("tr", {}, h("td", { colspan: 5, class: "muted" }, "None.")))),
      h("h2", {}, "Script grants"),
      h("table", { class: "grid", id: "script-grants" },
        h("thead", {}, h("tr", {}, ["Skill", "Script", "Network", "Granted", "Expires", ""].map((title) => h("th", {}, title)))),
        h("tbody", {}, grants.script_grants.length ? grants.script_grants.map((grant) => {
          const expired = grant.expires_at && grant.expires_at <= now;
          const path = grant.script
            ? `/grants/scripts/${encodeURIComponent(grant.skill)}/${encodeURIComponent(grant.script)}`
            : `/grants/scripts/${encodeURIComponent(grant.skill)}`;
          return h("tr", {},
            h("td", {}, h("code", {}, grant.skill)),
            h("td", {}, grant.script ? h("code", {}, grant.script) : "every script"),
            h("td", {}, grant.network ? "yes" : "no"),
            h("td", {}, when(grant.granted_at)),
            h("td", {}, grant.expires_at ? h("span", { class: expired ? "badge bad" : "" }, (expired ? "expired " : "") + when(grant.expires_at)) : "never"),
            h("td", {}, h("button", { type: "button", class: "deny", onclick: revoke(path, grant.script || grant.skill) }, grant.script ? "Revoke" : "Revoke all for this skill")));
        }) : h("tr", {}, h("td", { colspan: 6, class: "muted" }, "None.")))));
  };
  await load();
}
