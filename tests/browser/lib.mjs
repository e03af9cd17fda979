// lib.mjs: what the browser scenarios share — Debian's Chromium started headless through playwright-core, the service's address and keys from the environment, checks that fail the scenario with a reason, and screenshots written to docs/console/ when WARDEN_UPDATE_SCREENSHOTS=1.

import { mkdtempSync, mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = dirname(fileURLToPath(import.meta.url));

export function env(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (the Rust test that runs this scenario sets it)`);
  return value;
}

export function check(condition, message) {
  if (!condition) throw new Error(`check failed: ${message}`);
  console.log(`ok: ${message}`);
}

/** Chromium with a fresh profile; `close()` removes it. */
export async function launch() {
  const profile = mkdtempSync(join(tmpdir(), "warden-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.WARDEN_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
    viewport: { width: 1280, height: 860 },
    locale: "en-US",
    timezoneId: "UTC",
  });
  const errors = [];
  context.on("weberror", (error) => errors.push(String(error.error())));
  return {
    context,
    errors,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** A screenshot of `page` into docs/console/NAME.png, when asked to update them. */
export async function screenshot(page, name) {
  if (process.env.WARDEN_UPDATE_SCREENSHOTS !== "1") return;
  const folder = join(here, "../../docs/console");
  mkdirSync(folder, { recursive: true });
  await page.screenshot({ path: join(folder, `${name}.png`), fullPage: false });
  console.log(`screenshot: docs/console/${name}.png`);
}

/** Calls the service's API from the scenario itself (the product's backend, in a real setup). */
export async function api(base, key, method, path, body) {
  const init = { method, headers: { Authorization: `Bearer ${key}` } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(`${base}/v1${path}`, init);
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

/** Runs `scenario`, printing its failure and exiting non-zero on one. */
export async function run(scenario) {
  try {
    await scenario();
    console.log("scenario passed");
  } catch (error) {
    console.error(`scenario failed: ${error.stack || error}`);
    process.exitCode = 1;
  }
}
