// Faults with nothing lost: a `kvbench run` at up to 200 requests/s (less on a machine where the
// worker cannot serve 2.5 times that: see `rateFor`) against the built worker under
// Miniflare, measuring kv, upstash (our gateway over a real redis-server), denokv (a real
// `denokv`) and redis (redis-server over TCP), while the test kills and restarts redis-server,
// the gateway and denokv in turn — each on the same port, so the worker reaches it again — and
// SIGSTOPs the gateway for 10 s. Every request must come back answered (report.json: sent =
// answered, no failure), the stores that were down must fail by kind in the answers of their
// outage while the others are measured in the same answers, nothing but a rare timeout (the
// shared machine's load) may fail outside an outage, and the same wasm instance (never restarted)
// must answer a last /test with every store ok.
// Env: KVBENCH_BIN (default target/debug/kvbench), GATEWAY_BIN, DENOKV_BIN, REDIS_SERVER_BIN.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { ROOT, sleep, startDenoKv, startGateway, startRedis, startWorker, stop } from "./procs.mjs";

const KVBENCH_BIN = process.env.KVBENCH_BIN ?? path.join(ROOT, "target/debug/kvbench");
const UPSTASH_TOKEN = "faults-e2e-upstash-" + process.pid;
const DENO_TOKEN = "faults-e2e-denokv-token-" + process.pid;
const STORES = ["kv", "upstash", "denokv", "redis"];
// The run's rate: 200 requests/s, or less where the worker's capacity, measured in the same run
// (closed loop, every store up), is under 2.5 times that — a fault test, not a load test: at
// saturation every store times out together and no outage can be told from the queue. Seen on
// this 2-core machine kind: ~1,300 requests/s for `kv,upstash` on one day, ~140 for this set on
// another (memory four times slower, a C loop's speed unchanged).
const RATE_MAX = 200;
const RATE_MIN = 20;
const HEADROOM = 2.5;
const CALIBRATE_S = 3;
const CALIBRATE_LOOPS = 8;
const DURATION_S = 45;
// A cold isolate is slow (wasm tiering up, every key a miss that writes four stores): warm it at
// a rate it keeps up with, not counted.
const WARM_RATE = 50;
const WARM_S = 8;
// Of the answers, the most in which a store that was up may time out (the machine's load: on a
// 2-core machine with load ~6, 285 of 9,000 answers, 3.2%, once timed out while the gateway was
// being stopped). A store failing through another's outage (3 s: 600 answers) is more than this.
const STRAY_MAX = 0.06;
// Of the answers surely inside one outage, the most in which a store that was up may fail.
const UP_FAIL_MAX = 0.1;
// Small, so that a stopped store costs each request little (a timeout, then at most as long
// again waiting for the abandoned call), yet above what a loaded 2-core machine adds to a call.
const TIMEOUT_MS = 500;
// 1 KiB values, so that 200 requests/s of misses stay cheap.
const QUERY = `stores=${STORES.join(",")}&timeout_ms=${TIMEOUT_MS}&min_bytes=1024&max_bytes=1024&keys=500`;
// The schedule starts after kvbench printed its first line, once its connections are open (0.25 s
// here): up to LAG_S later, so an outage seen by the test at [from, to] is at [from - LAG_S, to]
// at the latest and [from, to] at the earliest on the schedule's clock. A request also reaches a
// store a little after its intended start.
const LAG_S = 1;
const REACH_S = 1;

let redis, gateway, denokv, mf, url, dir;
/** workerd's output: a panic, or the shim's "Reinitializing Wasm application", shows here. */
let runtimeOutput = "";

before(async () => {
  assert.ok(fs.existsSync(KVBENCH_BIN), `kvbench not found at ${KVBENCH_BIN}: run 'cargo build -p kvbench'`);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-e2e-faults-"));
  redis = await startRedis();
  gateway = await startGateway(redis.port, UPSTASH_TOKEN);
  denokv = await startDenoKv(DENO_TOKEN);
  mf = await startWorker(
    {
      STORES: STORES.join(","),
      UPSTASH_REDIS_REST_URL: gateway.url,
      UPSTASH_REDIS_REST_TOKEN: UPSTASH_TOKEN,
      DENO_KV_URL: denokv.url,
      DENO_KV_ACCESS_TOKEN: DENO_TOKEN,
      REDIS_URL: `redis://127.0.0.1:${redis.port}`,
    },
    {
      host: "127.0.0.1",
      port: 0,
      // workerd's output (a wasm panic, an isolate re-initialised) as Miniflare 5 hands it on.
      handleStructuredLogs(log) {
        runtimeOutput = `${runtimeOutput}${log.level}: ${log.message}\n`.slice(-20000);
      },
    },
  );
  url = (await mf.ready).toString().replace(/\/$/, "");
});

after(async () => {
  await mf?.dispose();
  if (gateway) {
    gateway.proc.kill("SIGCONT");
    await stop(gateway.proc);
  }
  await stop(redis?.proc);
  await denokv?.stop();
  if (denokv) fs.rmSync(denokv.dir, { recursive: true, force: true });
  if (dir && process.env.KVBENCH_E2E_KEEP !== "1") fs.rmSync(dir, { recursive: true, force: true });
  else if (dir) console.log(`kept ${dir}`);
});

/** Kills `proc` with SIGKILL and waits (bounded) until it is gone. */
async function kill(proc) {
  proc.kill("SIGKILL");
  const gone = await Promise.race([proc.exited.then(() => true), sleep(5000).then(() => false)]);
  assert.ok(gone, `pid ${proc.pid} survived SIGKILL for 5 s`);
}

/** The faults, in order: what is down, from when to when (s since the schedule's start, as the
 * test saw it), and which stores that takes down with which error kind: a refused connection is
 * `runtime` (the worker's fetch or connect() failed), the gateway's answer when its Redis is gone
 * `http` (a 5xx), a stopped process `timeout`. */
async function inject(t0) {
  const at = (ms) => sleep(Math.max(0, t0 + ms - Date.now()));
  const since = () => Date.now() - t0;
  const windows = [];
  const outage = async (what, stores, startMs, down, upMs, up) => {
    await at(startMs);
    const from = since();
    await down();
    await at(upMs);
    await up();
    windows.push({ what, stores, from_s: from / 1000, to_s: since() / 1000 });
  };
  await outage("redis-server killed", { upstash: "http", redis: "connect" }, 5000, () => kill(redis.proc), 8000, async () => {
    redis = await startRedis([], { port: redis.port });
  });
  await outage("gateway killed", { upstash: "runtime" }, 12000, () => kill(gateway.proc), 15000, async () => {
    gateway = await startGateway(redis.port, UPSTASH_TOKEN, [], {}, { port: gateway.port });
  });
  await outage("denokv killed", { denokv: "runtime" }, 19000, () => kill(denokv.proc), 22000, async () => {
    denokv = await startDenoKv(DENO_TOKEN, denokv);
  });
  await outage("gateway stopped (SIGSTOP 10 s)", { upstash: "timeout" }, 26000, () => gateway.proc.kill("SIGSTOP"), 36000, () =>
    gateway.proc.kill("SIGCONT"),
  );
  return windows;
}

/** `kvbench run` at `rate` for `durationS` in the background, into `out`: resolves `started` once
 * its schedule is about to start (the time it printed that), and `ended` with how it ended. */
function runKvbench(out, rate, durationS, extra = []) {
  const child = spawn(
    KVBENCH_BIN,
    [
      "run", "--url", `${url}/test?${QUERY}`, "--rate", String(rate), "--duration", `${durationS}s`,
      "--interval", "5s", "--out", out, ...extra,
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let stdout = "";
  let stderr = "";
  child.stderr.on("data", (d) => (stderr = (stderr + d).slice(-20000)));
  const ended = new Promise((resolve) => {
    // Bounded: past three times its duration and a minute, something hangs.
    const timer = setTimeout(() => child.kill("SIGKILL"), 3 * durationS * 1000 + 60_000);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
  const started = new Promise((resolve, reject) => {
    child.stdout.on("data", (d) => {
      const before = stdout;
      stdout = (stdout + d).slice(-20000);
      // Printed just before the connections open and the schedule starts.
      if (!before.includes(" req/s to ") && stdout.includes(" req/s to ")) resolve(Date.now());
    });
    ended.then((e) => reject(new Error(`kvbench ended before its run started: ${JSON.stringify(e)}`)));
  });
  started.catch(() => {});
  return { started, ended, kill: () => child.kill("SIGKILL") };
}

/** The worker's closed-loop capacity with every store up: CALIBRATE_LOOPS loops of /test for
 * CALIBRATE_S seconds; { per_s, answered }. Each answer must be a 200 (a store may time out:
 * the machine may be slow; the run is what counts them). */
async function capacity() {
  let answered = 0;
  const end = Date.now() + CALIBRATE_S * 1000;
  const t0 = Date.now();
  await Promise.all(
    Array.from({ length: CALIBRATE_LOOPS }, async (_, i) => {
      for (let n = 0; Date.now() < end; n++) {
        const res = await fetch(`${url}/test?${QUERY}&key=calibrate-${i}-${n % 50}`);
        const body = await res.json();
        answered++;
        assert.equal(res.status, 200, JSON.stringify(body));
      }
    }),
  );
  return { per_s: answered / ((Date.now() - t0) / 1000), answered };
}

/** The run's rate for a closed-loop capacity: capacity / HEADROOM, in tens, within [RATE_MIN, RATE_MAX]. */
function rateFor(perS) {
  return Math.max(RATE_MIN, Math.min(RATE_MAX, Math.floor(perS / HEADROOM / 10) * 10));
}

/** samples.csv: one answer per intended start, { t_s, stores: { name: { error, read_us } } },
 * and the failed requests. */
function readSamples(file) {
  const lines = fs.readFileSync(file, "utf8").trim().split("\n");
  const header = lines.shift().split(",");
  const col = Object.fromEntries(header.map((h, i) => [h, i]));
  const answers = new Map();
  const failed = [];
  for (const line of lines) {
    const f = line.split(",");
    const intended = Number(f[col.intended_us]);
    if (f[col.outcome] !== "ok") {
      failed.push({ t_s: intended / 1e6, kind: f[col.outcome] });
      continue;
    }
    let a = answers.get(intended);
    if (!a) answers.set(intended, (a = { t_s: intended / 1e6, stores: {} }));
    a.stores[f[col.store]] = { error: f[col.store_error] || null, read_us: f[col.read_us], connect_us: f[col.connect_us] };
  }
  return { answers: [...answers.values()], failed };
}

test("kill, restart and SIGSTOP the stores mid-run: every request answered, the failures by kind, the worker still serving", { timeout: 240_000 }, async () => {
  const warm = await runKvbench(path.join(dir, "warm"), WARM_RATE, WARM_S).ended;
  assert.equal(warm.code, 0, `warm-up: ${warm.stdout}\n${warm.stderr}`);
  const warmed = JSON.parse(fs.readFileSync(path.join(dir, "warm/report.json"), "utf8")).total;
  const calibrated = await capacity();
  const RATE = rateFor(calibrated.per_s);
  console.log(`capacity ${calibrated.per_s.toFixed(0)} requests/s closed loop: the run at ${RATE} requests/s`);
  const out = path.join(dir, "out");
  // Room for the stopped gateway's requests (a timeout and a wait each: ~1 s in flight) and a
  // stall of the shared machine, so that no request is refused for want of a connection.
  const run = runKvbench(out, RATE, DURATION_S, ["--samples-csv", "--connections", "512", "--max-in-flight", "4000"]);
  let windows;
  try {
    windows = await inject(await run.started);
  } catch (e) {
    run.kill();
    throw e;
  }
  const ended = await run.ended;
  assert.equal(ended.code, 0, `kvbench: ${ended.code} ${ended.signal}\n${ended.stdout}\n${ended.stderr}`);

  const total = JSON.parse(fs.readFileSync(path.join(out, "report.json"), "utf8")).total;

  // The same worker answers with every store ok, in the same wasm instance: its request count
  // ran on through the warm-up, the run and this request (a new instance starts again from 1),
  // and each kvbench run's GET / once it ended (its report's provenance), when it reached it.
  const res = await fetch(`${url}/test?${QUERY}&key=faults-after`);
  const last = await res.json();
  assert.equal(res.status, 200, JSON.stringify(last));
  for (const s of STORES) assert.equal(last.stores[s].error, null, `${s}: ${JSON.stringify(last.stores[s].error)}`);
  const describes = 2;
  const reached = [
    warmed.answered + calibrated.answered + total.answered + 1,
    warmed.sent + calibrated.answered + total.sent + 1 + describes,
  ];
  assert.ok(
    last.isolate_requests >= reached[0] && last.isolate_requests <= reached[1],
    `isolate_requests ${last.isolate_requests}, not in ${reached}: the wasm instance was replaced\n${runtimeOutput}`,
  );
  assert.doesNotMatch(runtimeOutput, /panicked|Critical|Reinitializing/);

  // Every request is accounted for, and every one was answered.
  const failures = Object.values(total.failures).reduce((a, b) => a + b, 0);
  assert.equal(total.scheduled, RATE * DURATION_S);
  assert.equal(total.sent, total.answered + failures, JSON.stringify(total.failures));
  assert.deepEqual(total.failures, {}, "no request failed: a store's outage is an error in the answer");
  assert.equal(total.answered, total.scheduled);

  const { answers, failed } = readSamples(path.join(out, "samples.csv"));
  assert.deepEqual(failed, []);
  assert.equal(answers.length, total.answered, "samples.csv has a row per store of every answer");

  // Where each store's errors may be: its outages, widened by the slack.
  const down = (store, t) =>
    windows.some((w) => w.stores[store] && t >= w.from_s - LAG_S - REACH_S && t <= w.to_s + REACH_S);
  // Outside its outages a store may only time out, and rarely: this machine's load (other builds
  // share its two cores) can hold a call past the timeout. Any other kind, or many, is a fault
  // leaking into a store that was up.
  const stray = Object.fromEntries(STORES.map((s) => [s, []]));
  for (const a of answers) {
    assert.deepEqual(Object.keys(a.stores).sort(), [...STORES].sort(), `answer at ${a.t_s} s`);
    for (const [store, r] of Object.entries(a.stores)) {
      if (r.error === null) {
        assert.notEqual(r.read_us, "", `${store} at ${a.t_s} s: no error and no read time`);
      } else if (!down(store, a.t_s)) {
        stray[store].push(`${a.t_s.toFixed(3)} s ${r.error}`);
      }
    }
  }
  for (const [store, errors] of Object.entries(stray)) {
    const notTimeout = errors.filter((e) => !e.endsWith(" timeout/read") && !e.endsWith(" timeout/write"));
    assert.deepEqual(notTimeout, [], `${store} failed outside its outages: ${JSON.stringify(windows)}`);
    const times = errors.map((e) => parseFloat(e)).sort((a, b) => a - b);
    assert.ok(
      errors.length <= answers.length * STRAY_MAX,
      `${store}: ${errors.length} timeouts outside its outages, at ${times[0]}–${times.at(-1)} s ` +
        `(${JSON.stringify(Object.fromEntries(Object.entries(stray).map(([k, v]) => [k, v.length])))}; ` +
        `Deno KV metadata exchanges: ${answers.filter((a) => a.stores.denokv?.connect_us).length}); ${JSON.stringify(windows)}`,
    );
  }
  const kinds = {};
  for (const w of windows) {
    // Surely inside the outage, every answer has the stores that were down failing by their kind
    // and the others measured.
    const inside = answers.filter((a) => a.t_s >= w.from_s && a.t_s <= w.to_s - LAG_S - REACH_S / 2);
    assert.ok(inside.length >= RATE / 2, `${w.what}: only ${inside.length} answers surely inside ${JSON.stringify(w)}`);
    const seen = {};
    const upFailed = {};
    for (const a of inside) {
      for (const [store, r] of Object.entries(a.stores)) {
        if (w.stores[store]) {
          assert.ok(r.error, `${w.what}: ${store} did not fail at ${a.t_s} s`);
          assert.equal(r.error.split("/")[0], w.stores[store], `${w.what}: ${store}'s error at ${a.t_s} s`);
          const key = `${store} ${r.error}`;
          seen[key] = (seen[key] ?? 0) + 1;
        } else if (r.error !== null) {
          // Counted with the strays above (a timeout of the machine's load, or a failure).
          assert.ok(stray[store].some((e) => e.startsWith(a.t_s.toFixed(3))), `${w.what}: ${store} failed at ${a.t_s} s`);
          upFailed[store] = (upFailed[store] ?? 0) + 1;
        }
      }
    }
    // A fault that leaks from the store that is down into one that is up shows inside the
    // outage, where the run-wide STRAY_MAX would dilute it over the whole run: here a store that
    // was up may time out in at most UP_FAIL_MAX of the window's answers (the machine's load is
    // scattered over the run; a leak is in nearly every answer of the window).
    for (const [store, n] of Object.entries(upFailed)) {
      assert.ok(n <= inside.length * UP_FAIL_MAX, `${w.what}: ${store} was up and failed in ${n} of the ${inside.length} answers surely inside the outage`);
    }
    kinds[w.what] = seen;
  }
  console.log(JSON.stringify({ windows, kinds, stray: Object.fromEntries(Object.entries(stray).map(([k, v]) => [k, v.length])), answered: total.answered, errors: Object.fromEntries(STORES.map((s) => [s, total.stores[s].errors])) }, null, 1));

});
