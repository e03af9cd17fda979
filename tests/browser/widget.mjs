// widget.mjs: the chat widget embedded in a product page on another origin — one script tag with a widget token minted by the product's backend; the user chats with the keyboard, replies stream as markdown, and the page's client-side tool handlers answer the model's calls (a result, a thrown error, and a tool with no handler). The page's own CSS does not reach the widget.
//
// Environment: WARDEN_URL (the service, no /v1), WARDEN_APP_KEY (the product's key).

import { createServer } from "node:http";
import { api, check, env, launch, run, screenshot } from "./lib.mjs";

const TIMEOUT = { timeout: 60_000 }; // a hang guard only

/** The product's page: its own hostile CSS, the widget's script tag, and its tool handlers. */
function productPage(base, token) {
  return `<!doctype html>
<html><head><meta charset="utf-8"><title>Shop</title>
<style>
  body { font-family: Georgia, serif; margin: 2rem; background: #fafaf5; }
  /* A page's CSS that would wreck an unisolated widget. */
  button, textarea, section, div { display: none !important; color: red !important; }
  warden-chat { --warden-accent: #0b6e4f; --warden-radius: 10px; }
</style></head>
<body>
<h1>Example shop</h1>
<p>Order A-1042: 2 × blue mug.</p>
<script src="${base}/widget.js" data-agent="support" data-token="${token}" data-title="Ask the shop"></script>
<script>
  window.__calls = [];
  warden.tool("open_order", async ({ id }) => {
    window.__calls.push(["open_order", id]);
    return { id, status: "shipped", items: ["blue mug", "blue mug"] };
  });
  warden.tool("cancel_order", async ({ id }) => {
    window.__calls.push(["cancel_order", id]);
    throw new Error("orders that shipped cannot be cancelled");
  });
</script>
</body></html>`;
}

await run(async () => {
  const base = env("WARDEN_URL");
  const appKey = env("WARDEN_APP_KEY");
  // The product's backend mints a token for this user; the page never sees the tenant's key.
  const { token, expires_at: expiresAt } = await api(base, appKey, "POST", "/widget-tokens", { agent: "support", caller: "customer-42" });
  check(token.startsWith("wwt_") && expiresAt > Date.now() / 1000, "the product's backend mints a widget token");

  const server = createServer((request, response) => {
    response.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
    response.end(productPage(base, token));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const pageUrl = `http://localhost:${server.address().port}/`;
  const browser = await launch();
  try {
    const page = await browser.context.newPage();
    const script = page.waitForResponse((response) => response.url().endsWith("/widget.js"));
    await page.goto(pageUrl);
    const scriptResponse = await script;
    const csp = scriptResponse.headers()["content-security-policy"] || "";
    check(csp.includes("default-src 'none'"), `the widget's script is served with a strict Content-Security-Policy (${csp})`);

    // Keyboard only: Tab to the launcher, Enter opens the panel, type, Enter sends.
    const launcher = page.locator("warden-chat").getByRole("button", { name: "Ask the shop" });
    await launcher.waitFor(TIMEOUT);
    check(await launcher.isVisible(), "the page's CSS does not hide the widget (shadow DOM)");
    await page.keyboard.press("Tab");
    check(await launcher.evaluate((button) => button.getRootNode().activeElement === button), "the launcher takes the keyboard focus");
    await page.keyboard.press("Enter");
    const input = page.locator("warden-chat").getByRole("textbox", { name: "Your message" });
    await input.waitFor(TIMEOUT);
    check(await input.evaluate((box) => box.getRootNode().activeElement === box), "opening the panel focuses the message box");
    await page.keyboard.type("Where is my order A-1042?");
    await page.keyboard.press("Enter");

    const reply = page.locator("warden-chat .message.assistant").last();
    await reply.getByText("has shipped").waitFor(TIMEOUT);
    check(true, "the reply streams into the panel");
    check((await reply.locator("strong").textContent()) === "A-1042", "markdown bold is rendered");
    const links = await reply.locator("a").evaluateAll((anchors) => anchors.map((a) => a.getAttribute("href")));
    check(links.length === 1 && links[0] === "https://track.example/A-1042", `only the http(s) link becomes a link (${links.join(", ")})`);
    check((await reply.textContent()).includes("[the other](javascript:"), "a javascript: link stays text");
    check(await page.locator("warden-chat .message img, warden-chat .message script").count() === 0, "the reply's HTML is shown as text");
    const calls = await page.evaluate(() => window.__calls);
    check(JSON.stringify(calls) === JSON.stringify([["open_order", "A-1042"], ["cancel_order", "A-1042"]]), `the page's handlers were called with the model's arguments (${JSON.stringify(calls)})`);
    check(await page.locator("warden-chat .activity").count() >= 3, "the tool activity is shown");
    await screenshot(page, "widget");

    // Escape closes the panel and gives the focus back to the launcher.
    await page.keyboard.press("Escape");
    check(await launcher.isVisible(), "Escape closes the panel");

    // The next page of the shop (the same token): the conversation is still there.
    await page.reload();
    await page.locator("warden-chat").getByRole("button", { name: "Ask the shop" }).click();
    await page.locator("warden-chat .message.assistant").getByText("has shipped").waitFor(TIMEOUT);
    const restored = await page.locator("warden-chat .message.user").allTextContents();
    check(restored.length === 1 && restored[0] === "Where is my order A-1042?", "after a reload the conversation is shown again");
    check(JSON.stringify(await page.evaluate(() => window.__calls)) === "[]", "a replayed conversation runs no handler again");
    check(browser.errors.length === 0, `no script error in the page (${browser.errors.join("; ")})`);
  } finally {
    await browser.close();
    server.close();
  }
});
