// console-admin.mjs: a tenant admin in the console — signs in to the tenant's OAuth-protected server from the Servers page (the authorization page opens in a new tab and comes back to the service), copies a prompt in from a server and reads the snapshot, and downloads the image a tool saved as an artifact from the session's live view.
//
// Environment (set by crates/cli/tests/it/console_browser.rs): WARDEN_URL (the service, no /v1),
// WARDEN_ADMIN_KEY (a tenant admin's key), WARDEN_APP_KEY (the product's key of the same tenant),
// WARDEN_CRM_URL (an MCP server behind OAuth).

import { readFileSync } from "node:fs";
import { api, check, env, launch, run, screenshot } from "./lib.mjs";

const TIMEOUT = { timeout: 60_000 }; // a hang guard only

await run(async () => {
  const base = env("WARDEN_URL");
  const adminKey = env("WARDEN_ADMIN_KEY");
  const appKey = env("WARDEN_APP_KEY");
  const browser = await launch();
  try {
    const page = await browser.context.newPage();
    await page.goto(`${base}/console`);
    await page.locator("#key").fill(adminKey);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.locator("#sessions").waitFor(TIMEOUT);

    // Servers: the admin registers the crm server, which needs a sign-in; the button opens the
    // authorization page in a new tab, which comes back to the service; a refresh shows it
    // connected.
    await page.goto(`${base}/console#/servers`);
    const register = page.getByRole("form", { name: "Register a server" });
    await register.getByLabel("Server name").fill("crm");
    await register.getByLabel("Server URL").fill(env("WARDEN_CRM_URL"));
    await register.getByRole("button", { name: "Register" }).click();
    await page.locator("#registered-servers table").getByText(env("WARDEN_CRM_URL")).waitFor(TIMEOUT);
    check(true, "the admin registers the tenant's server from the Servers page");
    const crm = page.locator('#server-status-table tr[data-server="crm"]');
    await crm.locator(".badge", { hasText: "needs login" }).waitFor(TIMEOUT);
    check(true, "the servers page shows the tenant's server waiting for a sign-in");
    const [popup] = await Promise.all([
      browser.context.waitForEvent("page", TIMEOUT),
      crm.getByRole("button", { name: "Sign in to crm" }).click(),
    ]);
    await popup.waitForLoadState("load", TIMEOUT);
    const landed = new URL(popup.url());
    check(landed.origin === base && landed.pathname === "/v1/oauth/callback", `the authorization comes back to the service's callback (${landed.pathname})`);
    check(/signed in/i.test(await popup.locator("body").textContent()), "the callback page says the sign-in is done");
    await popup.close();
    check(await crm.getByText("Finish signing in in the new tab").count() === 1, "the console says to finish in the new tab");
    await page.locator("#refresh-servers").click();
    await page.locator('#server-status-table tr[data-server="crm"] .badge', { hasText: "connected" }).waitFor(TIMEOUT);
    check(true, "after the sign-in a refresh shows the server connected");
    await screenshot(page, "servers-signed-in");

    // Prompt snapshots: copied in from the operator's server with arguments, then read.
    await page.goto(`${base}/console#/skills`);
    const form = page.getByRole("form", { name: "Copy a prompt in" });
    await form.getByLabel("Snapshot name").fill("greeting");
    await form.getByLabel("Server", { exact: true }).fill("shop");
    await form.getByLabel("Prompt on the server").fill("greet");
    await form.getByLabel("Arguments").fill("name=Ada\ntone=warm");
    await form.getByRole("button", { name: "Copy in" }).click();
    await page.locator("#prompt-snapshots").getByRole("link", { name: "greeting" }).click();
    await page.getByText("Greet Ada in a warm tone.").waitFor(TIMEOUT);
    check((await page.locator("main").textContent()).includes("Copied from shop / greet"), "the snapshot shows its messages and where it was copied from");
    await screenshot(page, "prompt-snapshot");
    // A prompt the server lacks is refused with the service's reason.
    await page.goto(`${base}/console#/skills`);
    await form.getByLabel("Snapshot name").fill("missing");
    await form.getByLabel("Server", { exact: true }).fill("shop");
    await form.getByLabel("Prompt on the server").fill("no_such_prompt");
    await form.getByRole("button", { name: "Copy in" }).click();
    await page.locator("#prompt-status .notice.error").waitFor(TIMEOUT);
    check(true, "a prompt the server does not have is refused with the reason");

    // Artifacts: a run's tool returns an image; the live view links the artifact and lists it,
    // and the download is the image's bytes.
    const session = await api(base, appKey, "POST", "/sessions", {});
    await api(base, appKey, "POST", `/sessions/${session.id}/messages`, { text: "Show me the picture." });
    await page.goto(`${base}/console#/sessions/${session.id}`);
    await page.locator("#session-state", { hasText: "done" }).waitFor(TIMEOUT);
    const link = page.locator(".tool-call .result button[data-download]").first();
    await link.waitFor(TIMEOUT);
    check((await page.locator(".tool-call .result").first().textContent()).includes("saved as artifact"), "the tool's result names its artifact, not its bytes");
    await page.locator("#artifacts-table tbody tr").first().waitFor(TIMEOUT);
    check((await page.locator("#artifacts-table").textContent()).includes("image/png"), "the session lists its artifact with its type");
    await screenshot(page, "session-artifacts");
    const [download] = await Promise.all([page.waitForEvent("download", TIMEOUT), link.click()]);
    const bytes = readFileSync(await download.path());
    check(bytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])), `the downloaded artifact is the PNG (${bytes.length} bytes)`);
    check(/^[0-9A-Za-z_-]+\.png$/.test(download.suggestedFilename()), `the download is named as the service names it (${download.suggestedFilename()})`);
    check(browser.errors.length === 0, `no script error in the console (${browser.errors.join("; ")})`);
  } finally {
    await browser.close();
  }
});
