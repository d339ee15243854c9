#!/usr/bin/env node
// Cargo's runner for wasm32-unknown-unknown (see .cargo/config.toml): executes every
// #[wasm_bindgen_test] of a test binary inside workerd, through Miniflare, with the worker's real
// bindings (KV, the Durable Object classes, D1 migrated, R2, the Cache API) configured by
// scripts/worker-options.mjs — the same options the dev stack and the e2e suites use — plus
// `connect()` to a redis-server this runner starts on a free loopback port (REDIS_URL), and
// `fetch` to the Upstash-REST gateway in front of it (built when missing; UPSTASH_*).
//
// It speaks wasm-bindgen-test's own protocol (what wasm-bindgen-test-runner's Node harness does):
// `wasm-bindgen --target web` over the binary, then a `WasmBindgenTestContext` runs the exported
// `__wbgt_*` functions. Each test runs alone, in its own request, so a hung test is stopped after
// a timeout with its name (and workerd restarted for the rest), and output reads like cargo's.
//
// Usage (cargo passes the file): wasm-test-runner FILE.wasm [FILTER] [--exact] [--skip F]...
//   [--nocapture] [--list] [--include-ignored | --ignored]
// Env: KVBENCH_WASM_TEST_TIMEOUT_S (per test, default 60), WASM_BINDGEN_BIN (default
// wasm-bindgen on PATH), REDIS_SERVER_BIN (default redis-server), and WASM_TEST_VAR_<NAME>=v,
// which becomes the var NAME of the test worker (the runner's own tests use it).
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { freePort, portOpen } from "./net.mjs";
import { LOCAL_HYPERDRIVE, ROOT, applyMigrations, newMiniflare, tomlVars, workerOptions } from "./worker-options.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function parseCli(argv) {
  const cli = { file: null, filter: null, exact: false, skip: [], nocapture: false };
  cli.list = false;
  cli.includeIgnored = false;
  cli.ignored = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--exact") cli.exact = true;
    else if (a === "--nocapture" || a === "--no-capture") cli.nocapture = true;
    else if (a === "--list") cli.list = true;
    else if (a === "--include-ignored") cli.includeIgnored = true;
    else if (a === "--ignored") cli.ignored = true;
    else if (a === "--skip") cli.skip.push(argv[++i] ?? "");
    else if (a === "--format" || a === "--test-threads" || a === "--color") i++;
    else if (a.startsWith("--format=") || a.startsWith("--test-threads=") || a === "--quiet" || a === "-q") {
      /* accepted, no effect: tests run one at a time */
    } else if (a.startsWith("-")) fail(`unknown flag ${a}`);
    else if (cli.file === null) cli.file = a;
    else if (cli.filter === null) cli.filter = a;
    else fail(`unexpected argument ${a}`);
  }
  if (!cli.file) fail("usage: wasm-test-runner FILE.wasm [FILTER] [--exact] [--skip F] [--nocapture] [--list]");
  return cli;
}

function fail(message) {
  console.error(`wasm-test-runner: ${message}`);
  process.exit(2);
}

/** The tests of a binary, as wasm-bindgen-test-runner lists them: `__wbgt_<modifiers>_<n>::<path>`. */
function listTests(bytes, cli) {
  const exports = WebAssembly.Module.exports(new WebAssembly.Module(bytes));
  const tests = [];
  let filtered = 0;
  const matches = (name, pattern) => (cli.exact ? name === pattern : name.includes(pattern));
  for (const { name: exp } of exports) {
    if (!exp.startsWith("__wbgt_")) continue;
    const sep = exp.indexOf("::");
    if (sep < 0) continue;
    const modifiers = exp.slice("__wbgt_".length).split("_")[0];
    const name = exp.slice(sep + 2);
    const ignored = modifiers.includes("$");
    if (cli.filter !== null && !matches(name, cli.filter)) filtered++;
    else if (cli.skip.some((s) => matches(name, s))) filtered++;
    else if (cli.ignored && !ignored) filtered++;
    else tests.push({ name, export: exp, ignored });
  }
  tests.sort((a, b) => a.name.localeCompare(b.name));
  return { tests, filtered };
}

/** The test worker's entry: the bindgen output, the Durable Object classes, one test per request. */
function entryModule(classes) {
  return `import * as glue from "./index.js";
import wasmModule from "./index_bg.wasm";

// wasm-bindgen-test writes its report through these globals (workerd's global scope is a
// ServiceWorkerGlobalScope, so it picks its worker formatter); each request collects its own lines.
let lines = [];
let nocapture = false;
globalThis.__wbg_test_output_writeln = (line) => lines.push(String(line));
globalThis.__wbgtest_og_console_log = (line) => lines.push(String(line));
globalThis.__wbg_test_invoke = (f) => f();
for (const method of ["debug", "log", "info", "warn", "error"]) {
  const handler = "__wbgtest_console_" + method;
  console[method] = (...args) => {
    if (nocapture) lines.push(args.map(String).join(" "));
    if (glue[handler]) glue[handler](args);
  };
}
const wasm = glue.initSync({ module: wasmModule });

${classes.map((c) => `export const ${c} = glue.${c};`).join("\n")}

export default {
  async fetch(request, env, ctx) {
    const { exportName, includeIgnored, capture } = await request.json();
    lines = [];
    nocapture = !capture;
    // What src/testing.rs hands a test as worker::Env / worker::Context.
    globalThis.__kvbench_test_env = env;
    globalThis.__kvbench_test_ctx = ctx;
    let ok = false;
    try {
      const cx = new glue.WasmBindgenTestContext(false);
      cx.include_ignored(includeIgnored);
      ok = await cx.run([wasm[exportName]]);
    } catch (e) {
      lines.push("runner: the test context threw: " + (e && e.stack ? e.stack : String(e)));
    }
    return Response.json({ ok, lines });
  },
};
`;
}

/** A private redis-server for the tests' `connect()`, stopped by PID when the runner exits. */
async function startRedis() {
  const port = await freePort();
  const bin = process.env.REDIS_SERVER_BIN ?? "redis-server";
  const child = spawn(bin, ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
    stdio: "ignore",
  });
  let spawnError = null;
  child.once("error", (e) => (spawnError = e));
  for (let i = 0; i < 100; i++) {
    if (spawnError) fail(`cannot start ${bin}: ${spawnError.message}`);
    if (await portOpen(port)) return { child, port };
    await sleep(50);
  }
  child.kill("SIGKILL");
  fail(`${bin} did not listen on 127.0.0.1:${port}`);
}

/** A private PostgreSQL (scripts/postgres.sh: its own data dir, a password, the table migrated)
 * for the postgres and hyperdrive stores' tests, stopped by PID when the runner exits. */
async function startPostgres(dir) {
  const port = await freePort();
  const password = `wasm-${Math.random().toString(36).slice(2)}`;
  const script = path.join(ROOT, "scripts/postgres.sh");
  const started = spawnSync("bash", [script, "start", path.join(dir, "postgres"), String(port), password], { encoding: "utf8" });
  if (started.status !== 0) fail(`scripts/postgres.sh start failed (bash scripts/setup.sh installs PostgreSQL): ${started.stderr}`);
  let stopped = false;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    spawnSync("bash", [script, "stop", path.join(dir, "postgres")], { stdio: "ignore" });
  };
  return { url: started.stdout.trim(), stop };
}

/** The Upstash-REST gateway in front of that redis-server (GATEWAY_BIN, default
 * target/debug/upstash-gateway, built here when it is missing — `cargo test -p kvbench-worker
 * --target wasm32-unknown-unknown` alone must work): the `upstash` store's `fetch` glue is
 * tested through it. */
async function startGateway(redisPort) {
  const bin = process.env.GATEWAY_BIN ?? path.join(ROOT, "target/debug/upstash-gateway");
  if (!fs.existsSync(bin)) {
    if (process.env.GATEWAY_BIN) fail(`GATEWAY_BIN=${bin} does not exist: build it with cargo build -p upstash-gateway, or unset GATEWAY_BIN`);
    process.stderr.write("wasm-test-runner: building upstash-gateway (the Upstash tests need it)\n");
    const built = spawnSync("cargo", ["build", "-p", "upstash-gateway", "--locked"], { cwd: ROOT, stdio: ["ignore", "inherit", "inherit"] });
    if (built.status !== 0 || !fs.existsSync(bin)) fail(`cargo build -p upstash-gateway failed (status ${built.status}): the Upstash wasm tests need ${bin}`);
  }
  const port = await freePort();
  const token = `wasm-test-${process.pid}-${Date.now()}`;
  const child = spawn(bin, ["--listen", `127.0.0.1:${port}`, "--redis-url", `redis://127.0.0.1:${redisPort}`], {
    stdio: "ignore",
    env: { ...process.env, UPSTASH_REDIS_REST_TOKEN: token, RUST_LOG: "warn" },
  });
  for (let i = 0; i < 200; i++) {
    if (await portOpen(port)) return { child, url: `http://127.0.0.1:${port}`, token };
    await sleep(50);
  }
  child.kill("SIGKILL");
  fail(`${bin} did not listen on 127.0.0.1:${port}`);
}

async function startWorker(dir, vars) {
  const options = workerOptions(vars, {
    scriptPath: path.join(dir, "runner.js"),
    modulesRoot: dir,
    host: "127.0.0.1",
    port: 0,
  });
  const mf = newMiniflare(options);
  await mf.ready;
  await applyMigrations(mf);
  return mf;
}

/** One test's result from the lines its context printed. */
function outcome(test, response) {
  const status = response.lines
    .map((l) => l.match(/^test .* \.\.\. (ok|FAILED|ignored)\b/))
    .find(Boolean)?.[1];
  const details = response.lines.filter(
    (l) => !/^running \d+ tests?$/.test(l) && !/^test .* \.\.\. /.test(l) && !/^test result: /.test(l),
  );
  if (status === "ignored") return { status: "ignored", details };
  return { status: response.ok && status === "ok" ? "ok" : "FAILED", details };
}

async function main() {
  const cli = parseCli(process.argv.slice(2));
  const bytes = fs.readFileSync(cli.file);
  const { tests, filtered } = listTests(bytes, cli);
  if (cli.list) {
    for (const t of tests) console.log(`${t.name}: test`);
    return 0;
  }
  if (tests.length === 0) {
    console.log(`\nrunning 0 tests\n\ntest result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; ${filtered} filtered out\n`);
    return 0;
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-wasm-test-"));
  const cleanup = [() => fs.rmSync(dir, { recursive: true, force: true })];
  try {
    const bindgen = process.env.WASM_BINDGEN_BIN ?? "wasm-bindgen";
    const gen = spawnSync(
      bindgen,
      ["--target", "web", "--out-name", "index", "--out-dir", dir, "--no-typescript", cli.file],
      { stdio: ["ignore", "inherit", "inherit"] },
    );
    if (gen.error) fail(`cannot run ${bindgen}: ${gen.error.message}`);
    if (gen.status !== 0) fail(`${bindgen} failed on ${cli.file}`);
    // The Durable Object classes the bindings name, exported by the entry like worker-build's shim.
    const classes = Object.values(workerOptions({}).durableObjects ?? {}).map((d) => d.className);
    fs.writeFileSync(path.join(dir, "runner.js"), entryModule([...new Set(classes)]));

    const redis = await startRedis();
    // Also on a signal or an exception: redis-server is stopped by PID whatever happens.
    process.once("exit", () => redis.child.kill("SIGKILL"));
    cleanup.push(() => redis.child.kill("SIGKILL"));
    const postgres = await startPostgres(dir);
    process.once("exit", postgres.stop);
    cleanup.push(postgres.stop);
    const gateway = await startGateway(redis.port);
    if (gateway) {
      process.once("exit", () => gateway.child.kill("SIGKILL"));
      cleanup.push(() => gateway.child.kill("SIGKILL"));
    }
    const vars = {
      ...tomlVars(path.join(ROOT, "wrangler.toml")),
      REDIS_URL: `redis://127.0.0.1:${redis.port}`,
      POSTGRES_URL: postgres.url,
      [LOCAL_HYPERDRIVE]: postgres.url,
      ...(gateway ? { UPSTASH_REDIS_REST_URL: gateway.url, UPSTASH_REDIS_REST_TOKEN: gateway.token } : {}),
    };
    for (const [k, v] of Object.entries(process.env)) {
      if (k.startsWith("WASM_TEST_VAR_")) vars[k.slice("WASM_TEST_VAR_".length)] = v;
    }
    const timeoutS = Number(process.env.KVBENCH_WASM_TEST_TIMEOUT_S ?? 60);
    if (!(timeoutS > 0)) fail(`KVBENCH_WASM_TEST_TIMEOUT_S: expected seconds > 0, got ${process.env.KVBENCH_WASM_TEST_TIMEOUT_S}`);

    let mf = await startWorker(dir, vars);
    cleanup.push(() => mf?.dispose());
    const started = Date.now();
    console.log(`\nrunning ${tests.length} test${tests.length === 1 ? "" : "s"} (inside workerd, Miniflare ${mfVersion()})`);
    const failures = [];
    let passed = 0;
    let ignored = 0;
    for (const test of tests) {
      let result;
      try {
        const url = await mf.ready;
        const res = await fetch(url, {
          method: "POST",
          body: JSON.stringify({ exportName: test.export, includeIgnored: cli.includeIgnored, capture: !cli.nocapture }),
          signal: AbortSignal.timeout(timeoutS * 1000),
        });
        const body = await res.text();
        let parsed;
        try {
          parsed = JSON.parse(body);
        } catch {
          parsed = { ok: false, lines: [`runner: the test worker answered ${res.status}: ${body.slice(0, 2000)}`] };
        }
        result = outcome(test, parsed);
      } catch (e) {
        const timedOut = e?.name === "TimeoutError";
        result = {
          status: "FAILED",
          details: [timedOut ? `test ${test.name} did not finish within ${timeoutS} s (KVBENCH_WASM_TEST_TIMEOUT_S): stopped` : `runner: ${e?.stack ?? e}`],
        };
        // The isolate may still be busy with it: a fresh workerd for the rest.
        await mf.dispose().catch(() => {});
        mf = await startWorker(dir, vars);
      }
      if (cli.nocapture) for (const l of result.details) if (l.trim()) console.log(l);
      console.log(`test ${test.name} ... ${result.status}`);
      if (result.status === "ok") passed++;
      else if (result.status === "ignored") ignored++;
      else failures.push({ test, details: result.details });
    }
    if (failures.length) {
      console.log("\nfailures:\n");
      for (const f of failures) {
        console.log(`---- ${f.test.name} ----`);
        for (const l of f.details) console.log(l);
        console.log("");
      }
      console.log("failures:");
      for (const f of failures) console.log(`    ${f.test.name}`);
    }
    const secs = ((Date.now() - started) / 1000).toFixed(2);
    console.log(
      `\ntest result: ${failures.length ? "FAILED" : "ok"}. ${passed} passed; ${failures.length} failed; ${ignored} ignored; 0 measured; ${filtered} filtered out; finished in ${secs}s\n`,
    );
    return failures.length ? 101 : 0;
  } finally {
    for (const f of cleanup.reverse()) {
      try {
        await f();
      } catch {
        /* best effort: every process this runner started is stopped */
      }
    }
  }
}

function mfVersion() {
  try {
    return JSON.parse(fs.readFileSync(path.join(ROOT, "node_modules/miniflare/package.json"), "utf8")).version;
  } catch {
    return "?";
  }
}

const signals = ["SIGINT", "SIGTERM"];
for (const s of signals) process.once(s, () => process.exit(130));
process.exit(await main());
