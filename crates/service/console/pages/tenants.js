// pages/tenants.js: the operator's view of the tenants — each with its live keys and sessions — and one tenant's keys (never their secrets), revocable. An operator's key only.

import { api, ApiError } from "../api.js";
import { h, notice, replace, when } from "../dom.js";

export async function show(main, [tenant], signal) {
  void signal;
  const status = h("div", { id: "tenants-status" });
  const body = h("div");
  replace(main, h("h1", {}, tenant ? ["Tenant ", h("code", {}, tenant)] : "Tenants"), status, body);
  try {
    if (tenant) await keys(body, status, tenant);
    else await tenants(body);
  } catch (error) {
    if (error instanceof ApiError && (error.status === 404 || error.status === 405) && /endpoint/.test(error.message)) {
      replace(body, h("p", { class: "muted" }, "Tenants are the operator's: sign in with an operator's key to see them."));
      return;
    }
    throw error;
  }
}

async function tenants(body) {
  const { tenants: rows } = await api("GET", "/tenants");
  replace(body, h("table", { class: "grid", id: "tenants" },
    h("thead", {}, h("tr", {}, ["Tenant", "Live keys", "Sessions", "Since"].map((title) => h("th", {}, title)))),
    h("tbody", {}, rows.length ? rows.map((row) => h("tr", {},
      h("td", {}, h("a", { href: `#/tenants/${encodeURIComponent(row.name)}` }, row.name)),
      h("td", {}, String(row.keys)),
      h("td", {}, String(row.sessions)),
      h("td", {}, when(row.created_at))))
      : h("tr", {}, h("td", { colspan: 4, class: "muted" }, "No tenants.")))));
}

async function keys(body, status, tenant) {
  const { keys: rows } = await api("GET", `/tenants/${encodeURIComponent(tenant)}/keys`);
  replace(body,
    h("p", {}, h("a", { href: "#/tenants" }, "← Tenants")),
    h("table", { class: "grid", id: "tenant-keys" },
      h("thead", {}, h("tr", {}, ["Key", "Caller", "Role", "Made", "Revoked", ""].map((title) => h("th", {}, title)))),
      h("tbody", {}, rows.length ? rows.map((row) => h("tr", { dataset: { key: row.id } },
        h("td", {}, h("code", {}, row.id)),
        h("td", {}, row.caller),
        h("td", {}, h("span", { class: "badge" }, row.role)),
        h("td", {}, when(row.created_at)),
        h("td", {}, row.revoked_at ? when(row.revoked_at) : ""),
        h("td", {}, row.revoked_at ? "" : h("button", {
          type: "button", class: "deny", onclick: async () => {
            try {
              await api("DELETE", `/keys/${encodeURIComponent(row.id)}`);
              await keys(body, status, tenant);
              replace(status, notice("ok", `Revoked ${row.id}.`));
            } catch (error) {
              replace(status, notice("error", error.message));
            }
          },
        }, "Revoke"))))
        : h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No keys.")))));
}
