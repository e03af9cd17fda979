// app.js: the console's shell: sign-in with an API key, the page list, and routing by the URL's hash (#/sessions, #/sessions/ID, #/approvals, …).

import { api, ApiError, signIn, signOut, signedIn } from "./api.js";
import { h, notice, replace } from "./dom.js";
import * as sessions from "./pages/sessions.js";
import * as approvals from "./pages/approvals.js";
import * as audit from "./pages/audit.js";
import * as servers from "./pages/servers.js";
import * as tools from "./pages/tools.js";
import * as skills from "./pages/skills.js";
import * as grants from "./pages/grants.js";
import * as tenants from "./pages/tenants.js";

const PAGES = [
  ["sessions", "Sessions", sessions],
  ["approvals", "Approvals", approvals],
  ["audit", "Audit", audit],
  ["servers", "Servers", servers],
  ["tools", "Tools", tools],
  ["skills", "Skills", skills],
  ["grants", "Grants", grants],
  ["tenants", "Tenants", tenants],
];

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const who = document.getElementById("who");
/** Aborted when the page changes: a page's streams and timers stop with it. */
let leaving = new AbortController();

function signInPage(reason) {
  replace(nav);
  replace(who);
  const key = h("input", {
    id: "key", type: "password", name: "key", autocomplete: "off", spellcheck: "false",
    required: true, "aria-describedby": "key-help",
  });
  const status = h("div", { id: "sign-in-status" });
  const form = h("form", {
    class: "sign-in", "aria-label": "Sign in",
    onsubmit: async (event) => {
      event.preventDefault();
      signIn(key.value.trim());
      try {
        await api("GET", "/sessions");
        if (location.hash === "" || location.hash === "#/sign-in") location.hash = "#/sessions";
        else route();
      } catch (error) {
        signOut();
        replace(status, notice("error", error instanceof ApiError ? error.message : `the service is unreachable: ${error.message}`));
      }
    },
  },
  h("h1", {}, "Sign in"),
  h("label", { for: "key" }, "API key"),
  key,
  h("p", { id: "key-help", class: "muted" },
    "An operator's or tenant's key (warden service key create). It is kept in this tab only, and forgotten when the tab closes."),
  h("button", { type: "submit" }, "Sign in"),
  status);
  replace(main, reason ? notice("error", reason) : null, form);
  key.focus();
}

function navigation(current) {
  replace(nav, h("ul", {},
    PAGES.map(([id, title]) => h("li", {},
      h("a", { href: `#/${id}`, "aria-current": id === current ? "page" : false }, title)))));
  replace(who, h("button", {
    type: "button", class: "link", onclick: () => {
      signOut();
      location.hash = "#/sign-in";
      signInPage();
    },
  }, "Sign out"));
}

async function route() {
  leaving.abort();
  leaving = new AbortController();
  if (!signedIn()) {
    signInPage();
    return;
  }
  const [, id = "sessions", ...rest] = location.hash.replace(/^#/, "").split("/");
  const page = PAGES.find(([name]) => name === id);
  if (!page) {
    location.hash = "#/sessions";
    return;
  }
  navigation(id);
  const [, title, module] = page;
  document.title = `${title} · warden console`;
  replace(main, h("p", { class: "muted" }, "Loading…"));
  try {
    await module.show(main, rest.map(decodeURIComponent), leaving.signal);
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      signOut();
      signInPage("The key is no longer accepted: sign in again.");
      return;
    }
    replace(main, h("h1", {}, title), notice("error", error.message));
  }
  main.focus({ preventScroll: true });
}

window.addEventListener("hashchange", route);
route();
