// What both A2A drivers (driver.mjs with the v1.0 SDK, driver-v03.mjs with the v0.3 one) share:
// the scenario and server from the command line and environment, the bearer-token fetch and
// the SDK client factory built on it, raw HTTP requests for what an SDK would never send, and
// the run that prints one JSON object of what was seen.
import http from "node:http";

export const scenario = process.argv[2];
export const base = process.env.WARDEN_A2A_URL;
export const token = process.env.WARDEN_A2A_TOKEN;

/** fetch with the bearer token, as an A2A platform configured with it sends every request. */
export function authFetch(input, init = {}) {
  const headers = new Headers(init.headers ?? {});
  headers.set("Authorization", `Bearer ${token}`);
  return fetch(input, { ...init, headers });
}

/** The SDK's client factory (`sdk` is its client module) over JSON-RPC with the bearer token. */
export function clientFactory(sdk) {
  return new sdk.ClientFactory(
    sdk.ClientFactoryOptions.createFrom(sdk.ClientFactoryOptions.default, {
      transports: [new sdk.JsonRpcTransportFactory({ fetchImpl: authFetch })],
      cardResolver: new sdk.DefaultAgentCardResolver({ fetchImpl: authFetch }),
    }),
  );
}

/** A JSON-RPC request's body. */
export function rpc(method, params = {}) {
  return JSON.stringify({ jsonrpc: "2.0", id: 7, method, params });
}

/** A raw HTTP request (Host and Origin as given), for what the SDK would never send. */
export function raw({ method = "POST", path = "/a2a", headers = {}, body = "" }) {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const request = http.request(
      {
        host: url.hostname,
        port: url.port,
        method,
        path,
        headers: { "content-type": "application/json", ...headers },
        agent: false, // a connection of its own: a refused one is closed by the server
      },
      (response) => {
        let text = "";
        response.on("data", (chunk) => (text += chunk));
        response.on("end", () => {
          let json = null;
          try {
            json = JSON.parse(text);
          } catch {}
          resolve({ status: response.statusCode, json, text: json ? undefined : text });
        });
      },
    );
    request.on("error", reject);
    if (headers.expect === "100-continue") {
      // The body goes only once the server asked for it: a refusal comes before it.
      request.on("continue", () => request.end(body));
      request.flushHeaders();
    } else {
      request.end(body);
    }
  });
}

/** Runs `action`, keeping its error as `errorOf` describes it (expected ones are asserted by the test). */
export async function expectError(errorOf, action) {
  try {
    await action();
    return null;
  } catch (error) {
    return errorOf(error);
  }
}

/** Runs the scenario of `scenarios` the command line names and prints what `seen` holds then. */
export async function run(scenarios, seen, errorOf) {
  try {
    await scenarios[scenario]();
  } catch (error) {
    seen.errors.push({ ...errorOf(error), stack: error?.stack });
  }
  process.stdout.write(JSON.stringify(seen) + "\n");
}
