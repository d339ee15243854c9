// Processes for the end-to-end suites: a private redis-server and the upstash-gateway on free
// loopback ports, started and stopped by PID, and the built worker under Miniflare. Env:
// GATEWAY_BIN (default target/debug/upstash-gateway), REDIS_SERVER_BIN (default redis-server on
// PATH).
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import fs, { existsSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "../../scripts/net.mjs";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const GATEWAY_BIN =
  process.env.GATEWAY_BIN ?? path.join(ROOT, "target/debug/upstash-gateway");
export const REDIS_SERVER_BIN = process.env.REDIS_SERVER_BIN ?? "redis-server";
export const DENOKV_BIN = process.env.DENOKV_BIN || "denokv";

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Resident memory of `pid` in MiB: `VmRSS` (now) or `VmHWM` (the peak since the last
 * {@link resetPeakRss}, or since the process started). */
export function rssMiB(pid, field = "VmRSS") {
  const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)[1]) / 1024;
}
/** The kernel's peak-RSS counter of `pid` set back to its current RSS (`/proc/PID/clear_refs` 5):
 * what {@link peakRssMiB} reads next is the peak of what happened after this call. Returns false
 * when the kernel refuses; the peak then runs from the process's start (an overestimate). */
export function resetPeakRss(pid) {
  try {
    fs.writeFileSync(`/proc/${pid}/clear_refs`, "5");
    return true;
  } catch {
    return false;
  }
}
/** The peak resident memory of `pid` in MiB since {@link resetPeakRss}: the kernel's own high
 * water mark, not a sample that a short spike between two reads could miss. */
export const peakRssMiB = (pid) => rssMiB(pid, "VmHWM");

/** Asserts `x` is a duration: a finite number ≥ 0. (`null >= 0` and `undefined`-free arithmetic
 * are true or NaN in JavaScript: a missing field must fail, not pass as zero.) Returns `x`. */
export function assertMs(x, what = "a duration") {
  if (typeof x !== "number" || !Number.isFinite(x) || x < 0) {
    throw new assert.AssertionError({ message: `${what}: ${JSON.stringify(x)} is not a finite number ≥ 0`, actual: x, expected: "a finite number ≥ 0", operator: "assertMs" });
  }
  return x;
}

export { freePort };

/** Spawns a process; rejects if it cannot start, remembers how it ended. */
export function start(bin, args, env) {
  const child = spawn(bin, args, {
    env: { ...process.env, ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  child.stderrText = "";
  child.stderr.on("data", (d) => {
    // Keep only the tail: enough to explain a failed start.
    child.stderrText = (child.stderrText + d).slice(-4000);
  });
  child.exited = new Promise((resolve) => child.once("exit", (code, sig) => resolve({ code, sig })));
  child.spawnError = new Promise((resolve) => child.once("error", resolve));
  return child;
}

export async function stop(child) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  child.kill("SIGTERM");
  const ended = await Promise.race([child.exited.then(() => true), sleep(5000).then(() => false)]);
  if (!ended) child.kill("SIGKILL");
}

export function redisPing(port) {
  return new Promise((resolve) => {
    const sock = net.connect(port, "127.0.0.1");
    let buf = "";
    sock.setTimeout(1000);
    sock.on("connect", () => sock.write("PING\r\n"));
    sock.on("data", (d) => {
      buf += d;
      if (buf.includes("\r\n")) {
        sock.destroy();
        resolve(buf.startsWith("+PONG"));
      }
    });
    sock.on("error", () => resolve(false));
    sock.on("timeout", () => {
      sock.destroy();
      resolve(false);
    });
  });
}

/** Polls `ready` up to `tries` times, failing with `what` and the process's stderr. */
export async function waitUntil(child, what, tries, ready) {
  let spawnError = null;
  child.spawnError.then((e) => (spawnError = e));
  for (let i = 0; i < tries; i++) {
    if (spawnError) throw new Error(`${what}: cannot start: ${spawnError.message}`);
    if (child.exitCode !== null) {
      throw new Error(`${what} exited with ${child.exitCode} at start:\n${child.stderrText}`);
    }
    if (await ready()) return;
    await sleep(50);
  }
  throw new Error(`${what} not ready after ${tries} tries:\n${child.stderrText}`);
}


/** A redis-server with no persistence on a free port (or `port`, to restart one where its
 * clients reach it): { proc, port }. `extraArgs` adds flags (e.g. `--requirepass`; PING then
 * answers NOAUTH, which still means "up"). */
export async function startRedis(extraArgs = [], { port } = {}) {
  port ??= await freePort();
  const proc = start(REDIS_SERVER_BIN, [
    "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", ...extraArgs,
  ]);
  const up = extraArgs.includes("--requirepass") ? (p) => redisAnswers(p) : redisPing;
  await waitUntil(proc, `redis-server (${REDIS_SERVER_BIN}; set REDIS_SERVER_BIN)`, 200, () =>
    up(port),
  );
  return { proc, port };
}

/** True when something on `port` answers a RESP PING with any reply. */
function redisAnswers(port) {
  return new Promise((resolve) => {
    const sock = net.connect(port, "127.0.0.1");
    sock.setTimeout(1000);
    sock.on("connect", () => sock.write("PING\r\n"));
    sock.on("data", () => {
      sock.destroy();
      resolve(true);
    });
    sock.on("error", () => resolve(false));
    sock.on("timeout", () => {
      sock.destroy();
      resolve(false);
    });
  });
}

/** The gateway in front of `redisPort`: { proc, url, port }. `extraArgs` adds flags (e.g.
 * faults); `port` listens there instead of on a free port (a restart). */
export async function startGateway(redisPort, token, extraArgs = [], env = {}, { port } = {}) {
  if (!existsSync(GATEWAY_BIN)) {
    throw new Error(`gateway binary not found at ${GATEWAY_BIN}: run 'cargo build -p upstash-gateway' or set GATEWAY_BIN`);
  }
  port ??= await freePort();
  const url = `http://127.0.0.1:${port}`;
  const proc = start(
    GATEWAY_BIN,
    ["--listen", `127.0.0.1:${port}`, "--redis-url", `redis://127.0.0.1:${redisPort}`, ...extraArgs],
    { UPSTASH_REDIS_REST_TOKEN: token, RUST_LOG: "warn", ...env },
  );
  await waitUntil(proc, "upstash-gateway", 200, async () => {
    try {
      const res = await fetch(url, {
        method: "POST",
        headers: { Authorization: `Bearer ${token}` },
        body: '["PING"]',
      });
      return res.ok;
    } catch {
      return false;
    }
  });
  return { proc, url, port };
}

/** One command through the gateway's REST API. */
export async function redisCommand(url, token, command) {
  const res = await fetch(url, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}` },
    body: JSON.stringify(command),
  });
  const body = await res.json();
  if (!res.ok) throw new Error(`${command[0]}: ${res.status} ${JSON.stringify(body)}`);
  return body.result;
}

/** The vars a test worker runs with: `bindings`, plus `BENCH_OPEN: "true"` when they give
 * neither `BENCH_TOKEN` nor `BENCH_OPEN` — a worker on loopback, open like `npm run dev`'s, where
 * a deployment without a token is closed. A key present with the value `undefined` is left unset,
 * so `{ BENCH_OPEN: undefined }` runs a closed worker. */
export function testVars(bindings) {
  const vars = "BENCH_TOKEN" in bindings || "BENCH_OPEN" in bindings ? { ...bindings } : { ...bindings, BENCH_OPEN: "true" };
  for (const [k, v] of Object.entries(vars)) if (v === undefined) delete vars[k];
  return vars;
}

/** The built worker (build/index.js + wasm) under Miniflare with its local bindings (KV, the
 * Durable Object class, D1 with migrations/ applied, R2, the Cache API), and `testVars(bindings)`. */
export async function startWorker(bindings, extra = {}) {
  const { applyMigrations, newMiniflare, workerOptions } = await import("../../scripts/worker-options.mjs");
  const mf = newMiniflare(workerOptions(testVars(bindings), { cf: false, ...extra }));
  await mf.ready;
  // `extra` may leave D1 out (a deployment without the binding).
  if (!extra.d1Databases || extra.d1Databases.length) await applyMigrations(mf);
  return mf;
}

/** The benchmark worker and the report worker (GET /report) in one Miniflare, as deployed, with
 * `testVars(bindings)`.
 * `splitArchive`: the run archive's objects in a second Miniflare (its own workerd, `archivePid`
 * on the result), reached across processes (scripts/worker-options.mjs `archiveOptions`).
 * `workers` > 1 (implies `splitArchive`): that many stacks, each its own workerd on its own port
 * (`urls` on the result: every stack's URL, the first one's first), all keeping runs in the one
 * archive — the local stand-in for a deployment's many isolates, since one workerd runs every
 * request on one thread. `archiveInspectorPort`: the archive's workerd's inspector (profiles).
 * The result's `dispose` stops them all. */
export async function startStack(bindings, extra = {}, { splitArchive = false, workers = 1, archiveInspectorPort, member = false } = {}) {
  if (workers > 1 && extra.port) throw new Error("startStack: several workers need port 0 (each its own)");
  bindings = testVars(bindings);
  const { applyMigrations, archiveOptions, newMiniflare, stackOptions } = await import("../../scripts/worker-options.mjs");
  let archive = null;
  let registry;
  let archivePid;
  if (splitArchive || workers > 1) {
    registry = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-registry-"));
    const before = new Set(childPids("workerd"));
    archive = newMiniflare(archiveOptions(bindings, registry, { inspectorPort: archiveInspectorPort }));
    await archive.ready;
    archivePid = childPids("workerd").find((p) => !before.has(p));
  }
  const stacks = [];
  try {
    for (let i = 0; i < workers; i++) {
      const one = newMiniflare(stackOptions(bindings, { cf: false, ...extra }, { archiveRegistry: registry, member }));
      stacks.push(one);
      await one.ready;
      await applyMigrations(one);
    }
  } catch (e) {
    for (const one of stacks) await one.dispose().catch(() => {});
    await archive?.dispose();
    if (registry) fs.rmSync(registry, { recursive: true, force: true });
    throw e;
  }
  const [mf, ...more] = stacks;
  mf.urls = async () => Promise.all(stacks.map(async (one) => (await one.ready).toString().replace(/\/$/, "")));
  if (archive) {
    const dispose = mf.dispose.bind(mf);
    mf.archivePid = archivePid;
    mf.dispose = async () => {
      await dispose();
      for (const one of more) await one.dispose();
      await archive.dispose();
      fs.rmSync(registry, { recursive: true, force: true });
    };
  }
  return mf;
}

/** A stack whose run archive is the class `FaultyRunArchive` of the module `source` (written as
 * build/`file`, beside the worker it imports from `./index.js`): a fault put into the archive's
 * storage, every other object the worker's own. `bindings` as for `startStack`. */
export async function startStackWithFaultyArchive(bindings, file, source) {
  const { BINDINGS } = await import("../../scripts/worker-options.mjs");
  const build = path.join(ROOT, "build");
  return startStack(bindings, {
    host: "127.0.0.1",
    port: 0,
    scriptPath: undefined,
    modules: [
      { type: "ESModule", path: path.join(build, file), contents: source },
      { type: "ESModule", path: path.join(build, "index.js") },
      { type: "CompiledWasm", path: path.join(build, "index_bg.wasm") },
    ],
    durableObjects: {
      [BINDINGS.durableObject]: { className: BINDINGS.durableObjectClass, useSQLite: true },
      [BINDINGS.probes]: { className: BINDINGS.probesClass, useSQLite: true },
      [BINDINGS.directory]: { className: BINDINGS.directoryClass, useSQLite: true },
      [BINDINGS.runs]: { className: "FaultyRunArchive", useSQLite: true },
    },
  });
}

/** A private PostgreSQL (scripts/postgres.sh: its own data dir, a SCRAM password, the migration
 * applied) on a free loopback port, in a new temp dir: { url (sslmode=disable), dir, data (the
 * server's data directory), stop() }. */
export async function startPostgres(password, prefix = "kvbench-pg-e2e-") {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const script = path.join(ROOT, "scripts/postgres.sh");
  let url;
  try {
    url = execFileSync("bash", [script, "start", dir, String(await freePort()), password], { encoding: "utf8" }).trim();
  } catch (e) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  const data = path.join(fs.readFileSync(path.join(dir, "postgres.data"), "utf8").trim(), "db");
  const stop = () => {
    execFileSync("bash", [script, "stop", dir]);
    fs.rmSync(dir, { recursive: true, force: true });
  };
  return { url, dir, data, stop };
}

const accepts = (port) =>
  new Promise((resolve) => {
    const c = net.connect(port, "127.0.0.1", () => {
      c.destroy();
      resolve(true);
    });
    c.on("error", () => resolve(false));
  });

/** A denokv (DENOKV_BIN) on a free loopback port with a fresh SQLite file, serving `token`:
 * { url, sqlite, dir, port, proc, stop }. `again` (a previous one's { dir, sqlite, port })
 * restarts it on the same port and file. */
export async function startDenoKv(token, again = null) {
  const dir = again?.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-e2e-denokv-"));
  const sqlite = again?.sqlite ?? path.join(dir, "kv.sqlite");
  const port = again?.port ?? (await freePort());
  const proc = start(DENOKV_BIN, [
    "--sqlite-path", sqlite, "serve", "--access-token", token, "--addr", `127.0.0.1:${port}`,
  ]);
  await waitUntil(proc, `denokv (${DENOKV_BIN}; run npm run setup or set DENOKV_BIN)`, 200, () => accepts(port));
  return { url: `http://127.0.0.1:${port}`, sqlite, dir, port, proc, stop: () => stop(proc) };
}

/** PIDs of this process's children named `comm` (e.g. Miniflare's `workerd`). */
export function childPids(comm) {
  return execFileSync("ps", ["-o", "pid=,comm=", "--ppid", String(process.pid)])
    .toString()
    .split("\n")
    .map((l) => l.trim().split(/\s+/))
    .filter(([, c]) => c === comm)
    .map(([pid]) => Number(pid));
}
