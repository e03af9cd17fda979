// console.mjs: an operator in the console — signs in, watches a session's run stream, approves its pending call from the queue and sees the run go on; a tool argument and a skill carrying HTML and script are shown as text; a skill with an error shows it at its line; the audit is filtered; a script grant is revoked. Screenshots of every page.
//
// Environment (set by crates/cli/tests/it/console_browser.rs): WARDEN_URL (the service, no /v1),
// WARDEN_OPERATOR_KEY (an operator key of the tenant), WARDEN_APP_KEY (the product's key).

import { api, check, env, launch, run, screenshot } from "./lib.mjs";

const HOSTILE = `<img src=x onerror="window.__pwned='img'"><script>window.__pwned='script'</script>`;
/** The payload as a JSON string shows it (its quotes escaped). */
const shown = (text) => text.includes("<img src=x onerror=") && text.includes("<script>window.__pwned='script'</script>");
const TIMEOUT = { timeout: 60_000 }; // a hang guard only

await run(async () => {
  const base = env("WARDEN_URL");
  const operatorKey = env("WARDEN_OPERATOR_KEY");
  const appKey = env("WARDEN_APP_KEY");
  const browser = await launch();
  try {
    const page = await browser.context.newPage();
    const response = await page.goto(`${base}/console`);
    const csp = response.headers()["content-security-policy"] || "";
    check(csp.includes("default-src 'none'") && csp.includes("script-src 'self'") && !csp.includes("unsafe"), `the console is served with a strict Content-Security-Policy (${csp})`);

    // Signing in: a wrong key is refused with the service's reason, the right one opens the console.
    await page.locator("#key").fill("wsk_not_a_key");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByText("unknown or revoked").waitFor(TIMEOUT);
    check(true, "a wrong key is refused at sign-in with the service's reason");
    await screenshot(page, "sign-in");
    await page.locator("#key").fill(operatorKey);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.locator("#sessions").waitFor(TIMEOUT);
    const stored = await page.evaluate(() => ({ session: Object.keys(sessionStorage), local: Object.keys(localStorage), cookie: document.cookie }));
    check(stored.session.includes("warden.console.key") && stored.local.length === 0 && stored.cookie === "", "the key is kept in the tab's session storage only (no local storage, no cookie)");
    check(!page.url().includes(operatorKey), "the key is never in the URL");

    // The approvals queue is open and empty; the product starts a session whose run writes a
    // note carrying HTML and script, and the call needing approval appears without a reload.
    // The page follows the tenant's event stream instead of polling: it asks for the queue when
    // it opens, when the stream is ready and when an approval comes or goes — not on a timer.
    const asked = { approvals: 0, tenantStreams: 0 };
    page.on("request", (request) => {
      const path = new URL(request.url()).pathname;
      if (request.method() === "GET" && path === "/v1/approvals") asked.approvals += 1;
      if (request.method() === "GET" && path === "/v1/events/stream") asked.tenantStreams += 1;
    });
    await page.goto(`${base}/console#/approvals`);
    await page.locator("#no-approvals").waitFor(TIMEOUT);
    const session = await api(base, appKey, "POST", "/sessions", { agent: "support" });
    await api(base, appKey, "POST", `/sessions/${session.id}/messages`, { text: "Please write the note." });
    await page.locator(`article.approval`).first().waitFor(TIMEOUT);
    check(true, "the approvals queue updates live with the new pending call");
    const askedWhenShown = asked.approvals;
    // Nothing changes for a while longer than two of the old 1.5 s polls: nothing is asked.
    await page.waitForTimeout(4_000);
    check(asked.tenantStreams === 1 && asked.approvals === askedWhenShown && askedWhenShown <= 4,
      `the approvals page follows the tenant's event stream and does not poll (${JSON.stringify(asked)}, ${askedWhenShown} when the call showed)`);
    await page.goto(`${base}/console#/sessions/${session.id}`);
    await page.getByText("Waiting for approval of").waitFor(TIMEOUT);
    check(true, "the live view streams the run up to the call waiting for approval");
    const toolCard = page.locator(".tool-call").first();
    check(shown(await toolCard.textContent()), "the tool call's arguments show the HTML payload as text");
    await screenshot(page, "session-waiting");

    // The sessions list says where the session stands.
    await page.goto(`${base}/console#/sessions`);
    const row = page.locator(`tr[data-session="${session.id}"]`);
    await row.getByText("waiting for approval").waitFor(TIMEOUT);
    check(true, "the sessions list shows the session waiting for approval");
    await screenshot(page, "sessions");

    // The approvals queue: the tool, its arguments as text, the classes, the caller and session.
    await page.goto(`${base}/console#/approvals`);
    const card = page.locator("article.approval").first();
    await card.waitFor(TIMEOUT);
    const cardText = await card.textContent();
    check(cardText.includes("write_file") && cardText.includes(session.id) && cardText.includes("web-app"), "the approval shows the tool, the session and the caller");
    check(shown(cardText), "the approval shows the argument's HTML and script as text");
    check(await card.locator(".badge").count() > 0, "the approval shows its capability classes as badges");
    check(await page.locator("main img, main script").count() === 0, "no element was made from the payload");
    await screenshot(page, "approvals");
    await card.getByRole("button", { name: "Allow once" }).click();
    await page.locator("#no-approvals").waitFor(TIMEOUT);
    check(true, "the decided approval leaves the queue");

    // The run goes on: the live view shows the tool's result and the model's answer.
    await page.goto(`${base}/console#/sessions/${session.id}`);
    await page.getByText("The note is written.").waitFor(TIMEOUT);
    await page.locator("#session-state", { hasText: "done" }).waitFor(TIMEOUT);
    check(true, "after the approval the run continues to the model's answer and ends");
    await screenshot(page, "session");

    // Skills: a skill whose description carries HTML is listed as text; an error shows at its line.
    await api(base, appKey, "PUT", "/skills/hostile", {
      text: `---\nname: hostile\ndescription: "${HOSTILE.replaceAll('"', "'")}"\n---\n\nBody ${HOSTILE}\n`,
    });
    await page.goto(`${base}/console#/skills`);
    await page.locator("#skills").getByText("<img src=x", { exact: false }).waitFor(TIMEOUT);
    check(await page.locator("main img, main script").count() === 0, "a skill's HTML description is listed as text, never as elements");
    await page.locator("#new-skill").fill("refunds");
    await page.getByRole("button", { name: "Create" }).click();
    await page.locator("#skill-text").waitFor(TIMEOUT);
    await page.locator("#skill-text").fill("---\nname: refunds\ndescription: [not closed\n---\n\nHow to refund an order.\n");
    await page.locator("#save-skill").click();
    const error = page.locator("#skill-status .notice.error");
    await error.waitFor(TIMEOUT);
    const message = await error.textContent();
    const named = Number((/line (\d+)/i.exec(message) || [])[1]);
    const marked = Number(await page.locator(".gutter li.error-line").textContent());
    check(named >= 2 && marked === named, `the skill's error is shown at line ${named} (${message})`);
    const caretLine = await page.locator("#skill-text").evaluate((area) => area.value.slice(0, area.selectionStart).split("\n").length);
    check(caretLine === named, "the editor puts the cursor on that line");
    await screenshot(page, "skill-error");
    await page.locator("#skill-text").fill("---\nname: refunds\ndescription: How to refund an order.\n---\n\nCheck the order, then refund it.\n");
    await page.locator("#save-skill").click();
    await page.getByText("Saved refunds.").waitFor(TIMEOUT);
    check(true, "the corrected skill saves");
    await page.goto(`${base}/console#/skills`);
    await page.locator("#skills").getByRole("link", { name: "refunds" }).waitFor(TIMEOUT);
    await screenshot(page, "skills");
    // Deleting it: the profile that names it is shown first, then it goes once confirmed.
    await page.locator("#skills").getByRole("link", { name: "refunds" }).click();
    await page.locator("#skill-text").waitFor(TIMEOUT);
    await page.getByRole("button", { name: "Delete", exact: true }).click();
    await page.getByText("Agent profiles name this skill: billing").waitFor(TIMEOUT);
    await page.getByRole("button", { name: "Delete anyway" }).click();
    await page.locator("#skills").waitFor(TIMEOUT);
    check(await page.locator("#skills").getByRole("link", { name: "refunds" }).count() === 0, "deleting a skill a profile names shows the profile, and deletes once confirmed");

    // The audit, filtered: by tool, then by a tool nothing called; one record in full.
    await page.goto(`${base}/console#/audit`);
    await page.locator("#audit-tool").fill("write_file");
    await page.getByRole("button", { name: "Filter" }).click();
    const first = page.locator("#audit tbody tr[data-record]").first();
    await first.waitFor(TIMEOUT);
    const tools = await page.locator("#audit tbody tr[data-record] td:nth-child(3)").allTextContents();
    check(tools.length > 0 && tools.every((tool) => tool === "write_file"), `the audit filtered by tool lists only write_file (${tools.length})`);
    await first.getByRole("button", { name: "Show" }).click();
    await page.locator("#audit-record pre").waitFor(TIMEOUT);
    check((await page.locator("#audit-record").textContent()).includes(session.id), "one record shows in full, naming its session");
    await screenshot(page, "audit");
    await page.locator("#audit-tool").fill("no_such_tool");
    await page.getByRole("button", { name: "Filter" }).click();
    await page.getByText("No records match.").waitFor(TIMEOUT);
    check(true, "a filter nothing matches lists no records");

    // Servers and tools.
    await page.goto(`${base}/console#/servers`);
    await page.locator("#registered-servers table").getByText("http://127.0.0.1:9/mcp").waitFor(TIMEOUT);
    check((await page.locator("#registered-servers").textContent()).includes("Bearer ${env:ORDERS_TOKEN}"), "the servers page lists the tenant's registered server with its header reference");
    await screenshot(page, "servers");
    await page.locator("#server-status-table, #server-status p").first().waitFor(TIMEOUT);
    await page.goto(`${base}/console#/tools/support`);
    await page.locator("#tools-table").waitFor(TIMEOUT);
    const client = page.locator('#tools-table tr[data-tool="open_order"]');
    check((await client.textContent()).includes("client"), "the tools page lists the agent's client-side tool with its source");
    check(await page.locator('#tools-table tr[data-tool="write_file"]').count() === 1, "the tools page lists the host tools the profile grants");
    check(await page.locator('#tools-table tr[data-tool="bash"]').count() === 0, "the tools page lists no host tool the profile does not grant");
    await screenshot(page, "tools");

    // Grants: the operator's script grant is listed and revoked.
    await page.goto(`${base}/console#/grants`);
    const grant = page.locator("#script-grants tbody tr", { hasText: "pdf-tools" });
    await grant.waitFor(TIMEOUT);
    check(await page.locator("#skill-grants tbody tr", { hasText: "skill://weather/forecast" }).count() === 1, "the skill grant is listed with its server's skill");
    await screenshot(page, "grants");
    await grant.getByRole("button").click();
    await page.getByText("Revoked").waitFor(TIMEOUT);
    check(await page.locator("#script-grants tbody tr", { hasText: "pdf-tools" }).count() === 0, "a revoked script grant leaves the list");

    // Tenants: the operator sees acme and revokes its admin's key.
    await page.goto(`${base}/console#/tenants`);
    await page.locator("#tenants").getByRole("link", { name: "acme" }).click();
    const adminKey = page.locator("#tenant-keys tr", { hasText: "admin@acme" });
    await adminKey.waitFor(TIMEOUT);
    await screenshot(page, "tenants");
    await adminKey.getByRole("button", { name: "Revoke" }).click();
    await page.getByText("Revoked key_").waitFor(TIMEOUT);
    check(await page.locator("#tenant-keys tr", { hasText: "admin@acme" }).getByRole("button", { name: "Revoke" }).count() === 0, "the operator revokes a tenant's key from the Tenants page");

    const pwned = await page.evaluate(() => window.__pwned || null);
    check(pwned === null, "no payload ran in the console");
    check(browser.errors.length === 0, `no script error in the console (${browser.errors.join("; ")})`);
  } finally {
    await browser.close();
  }
});
