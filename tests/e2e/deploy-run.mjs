// `npm run deploy` as the deploy tests run it: against the Cloudflare API stand-in
// (tests/e2e/cf-api.mjs), no terminal, bounded in time, its output captured; and what the tests
// read from the stand-in's record of requests (one run's requests, the mutating ones, the
// non-2xx answers each of which a test must expect by name).
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { startCfApi } from "./cf-api.mjs";
import { ROOT } from "./procs.mjs";

/** `npm run deploy` against `api`, stdin closed and output piped (no terminal), killed (its
 * process group) after `timeoutMs`. Resolves `{ code, out, ms, requests }`: `requests` are the
 * stand-in's records of this run alone. */
export function deploy(api, dir, env = {}, { timeoutMs = 15 * 60_000 } = {}) {
  const from = api.requests.length;
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn("npm", ["run", "--silent", "deploy"], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
      env: {
        ...process.env,
        ...api.env,
        KVBENCH_DEPLOY_DIR: dir,
        KVBENCH_DEPLOY_CHECK: "0",
        KVBENCH_SKIP_SETUP: "1",
        BENCH_TOKEN: "",
        POSTGRES_URL: "",
        FLEET_REGIONS: "none",
        ...env,
      },
    });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    const timer = setTimeout(() => {
      out += `\n[test] killed after ${timeoutMs} ms\n`;
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        /* already gone */
      }
    }, timeoutMs);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, out, ms: Date.now() - started, requests: api.requests.slice(from) });
    });
  });
}

/** `fn(api, dir)` with a fresh stand-in (`options` for startCfApi) and a deploy state directory,
 * both removed after. */
export async function withApi(prefix, fn, options = {}) {
  const api = await startCfApi(options);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  try {
    return await fn(api, dir);
  } finally {
    await api.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** The requests that change something on the account (anything but GET). */
export const mutating = (requests) => requests.filter((r) => r.method !== "GET");

/** A request's route with its account, names and ids replaced: `GET /accounts/:a/workers/scripts/:name/settings`. */
export const routeOf = (r) =>
  `${r.method} ${r.path
    .replace(/^\/accounts\/[^/]+/, "/accounts/:a")
    .replace(/^(\/accounts\/:a\/workers\/(?:scripts|services|workers))\/[^/]+/, "$1/:name")
    .replace(/\/(database|namespaces|configs)\/[0-9a-f-]{32,36}/, "/$1/:id")
    .replace(/\/buckets\/[^/]+/, "/buckets/:name")
    .replace(/\/secrets\/[^/]+/, "/secrets/:name")}`;

/**
 * The non-2xx answers of `requests` that no entry of `expected` names: each entry is
 * `{ route, status, why }` (`route` as routeOf writes it; `why` says why the deploy meets it).
 * A test asserts this is empty: an error the deploy swallowed fails the test.
 */
export function unexpectedErrors(requests, expected) {
  return requests
    .filter((r) => !(r.status >= 200 && r.status < 300))
    .filter((r) => !expected.some((e) => e.route === routeOf(r) && e.status === r.status))
    .map((r) => `${r.status} ${routeOf(r)}`);
}

/** The non-2xx answers wrangler meets on a worker's first deploy: it asks whether the worker
 * exists, what secrets and settings it has, and where it is deployed (each 404 means "new"). */
export const FIRST_DEPLOY_404S = [
  { route: "GET /accounts/:a/workers/services/:name", status: 404, why: "a new worker (code 10090)" },
  { route: "GET /accounts/:a/workers/scripts/:name/secrets", status: 404, why: "a new worker has no secrets yet" },
  { route: "GET /accounts/:a/workers/scripts/:name/deployments", status: 404, why: "a new worker has no deployments" },
  { route: "GET /accounts/:a/workers/scripts/:name/settings", status: 404, why: "a new worker has no settings" },
];
/** `r2 bucket info` on a bucket not made yet (scripts/resources.mjs: find, else create). */
export const NEW_BUCKET_404 = { route: "GET /accounts/:a/r2/buckets/:name", status: 404, why: "the bucket is looked up before it is created" };
