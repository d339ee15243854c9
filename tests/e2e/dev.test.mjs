// `npm run dev` (scripts/dev.sh) as a user runs it, on private ports and its own state dir: it
// builds each worker once (wrangler's own builds at start reuse that build), measures both
// Postgres stores (POSTGRES_URL, and BENCH_HYPERDRIVE bound by wrangler dev) on its private
// PostgreSQL, whose password it prints nowhere, runs a local fleet of
// three members whose answers the probes keep, survives a benchmark
// at saturation on a machine another CPU-bound job keeps busy, and an edit under src/ in the
// middle of it (one rebuild, then /test answers again), and Ctrl-C (SIGTERM) leaves no process
// behind, PostgreSQL included. Bounded: every wait has a deadline, the load and the CPU hogs stop by themselves.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { ROOT, GATEWAY_BIN, freePort, sleep } from "./procs.mjs";

const count = (text, re) => (text.match(re) || []).length;
const WORKER_BUILD = /worker-build --release \(\.\)/g;
const REPORT_BUILD = /worker-build --release \(crates\/report-worker\)/g;
const WORKER_REUSED = /build of \. reused/g;
const REPORT_REUSED = /build of crates\/report-worker reused/g;

const alive = (pid) => {
  try {
    return !/^\d+ \(.*\) [ZX] /.test(fs.readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
};

// What the stack is doing while a request waits, for the output of a lost answer: its
// processes (wrangler and its two workerd), the connections on the worker's port, and the
// worker log's lines about builds and reloads with the count of requests it logged since.
function stackLook(port, pids, log) {
  const run = (cmd, args) => {
    try {
      return execFileSync(cmd, args, { encoding: "utf8", timeout: 10_000, maxBuffer: 1 << 22 });
    } catch (e) {
      return `${cmd}: ${e.message}`;
    }
  };
  const groups = new Set(pids.map(String));
  const procs = run("ps", ["-eo", "pid,pgid,etimes,pcpu,rss,stat,args", "--no-headers"])
    .split("\n")
    .filter((l) => groups.has(l.trim().split(/\s+/)[1]) && /workerd|wrangler/.test(l))
    .map((l) => l.slice(0, 160));
  const conns = run("ss", ["-Htn", `( sport = :${port} or dport = :${port} )`]).split("\n").filter(Boolean);
  const lines = log.split("\n");
  const events = [];
  let requests = 0;
  for (const l of lines.slice(-4000).map((l) => l.replace(/\x1b\[[0-9;]*m/g, ""))) {
    if (/^\[wrangler:info\] (GET|HEAD|POST) /.test(l)) requests++;
    else if (/restarting build|Reloading|updated and ready|reused|worker-build|error|Error|✘/.test(l)) {
      events.push(`${l.slice(0, 160)} (after ${requests} logged requests)`);
    }
  }
  return [`at ${new Date().toISOString()}:`, ...procs, `${conns.length} connections on :${port}`, ...events.slice(-6)].join("\n");
}

async function until(what, ms, ready) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await ready()) return;
    await sleep(500);
  }
  throw new Error(`${what}: not within ${ms / 1000} s`);
}

async function get(url, ms = 30_000) {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(ms) });
    return { status: res.status, body: await res.text() };
  } catch (e) {
    return { status: 0, body: String(e) };
  }
}

test("npm run dev: one build each, survives saturation, a busy machine and an edit, stops clean", { timeout: 1_500_000 }, async () => {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench dev "));
  const stackDir = path.join(scratch, "stack");
  const builds = path.join(scratch, "builds");
  const [port, gateway, redis, denokv, postgres] = [await freePort(), await freePort(), await freePort(), await freePort(), await freePort()];
  // Make each worker's build stale, so the stack's start has exactly one real build of each to do.
  for (const dir of [".", "crates/report-worker"]) fs.rmSync(path.join(ROOT, dir, "build/.kvbench-build-key"), { force: true });

  const out = fs.openSync(path.join(scratch, "dev.out"), "w");
  const dev = spawn("bash", ["scripts/dev.sh"], {
    cwd: ROOT,
    stdio: ["ignore", out, out],
    env: {
      ...process.env,
      KVBENCH_PORT: String(port),
      KVBENCH_GATEWAY_PORT: String(gateway),
      KVBENCH_REDIS_PORT: String(redis),
      KVBENCH_DENOKV_PORT: String(denokv),
      KVBENCH_POSTGRES_PORT: String(postgres),
      KVBENCH_STACK_DIR: stackDir,
      KVBENCH_BUILDS: builds,
      KVBENCH_GATEWAY_BIN: GATEWAY_BIN,
    },
  });
  let exited = null;
  dev.on("exit", (code, sig) => (exited = { code, sig }));
  const devOut = () => fs.readFileSync(path.join(scratch, "dev.out"), "utf8");
  const workerLog = () => {
    try {
      return fs.readFileSync(path.join(stackDir, "worker.log"), "utf8");
    } catch {
      return "";
    }
  };
  const building = () => fs.existsSync(builds) && fs.readdirSync(builds).some((pid) => alive(Number(pid)));
  const stillUp = () => assert.equal(exited, null, `the stack stopped itself:\n${devOut().slice(-3000)}`);
  const base = `http://127.0.0.1:${port}`;
  const pids = [];
  let pg = null;
  try {
    await until("the stack answering /healthz", 900_000, async () => {
      stillUp();
      return (await get(`${base}/healthz`, 5000)).status === 200;
    });
    for (const f of fs.readdirSync(stackDir).filter((f) => f.endsWith(".pid"))) {
      pids.push(Number(fs.readFileSync(path.join(stackDir, f), "utf8")));
    }
    assert.ok(pids.length >= 4, `pids: ${pids}`);

    // Both Postgres stores on the stack's own PostgreSQL: the direct one (POSTGRES_URL) and
    // Hyperdrive (the binding wrangler.toml leaves out, in the config dev writes to its state
    // dir). A miss writes the row, the second read finds it: each reads the database.
    const url = fs.readFileSync(path.join(stackDir, "worker.env"), "utf8").match(/^POSTGRES_URL=(.*)$/m);
    assert.ok(url, "POSTGRES_URL in the worker's env file");
    pg = {
      pid: Number(fs.readFileSync(path.join(stackDir, "postgres.pid"), "utf8")),
      data: fs.readFileSync(path.join(stackDir, "postgres.data"), "utf8").trim(),
      password: decodeURIComponent(new URL(url[1]).password),
    };
    assert.equal(alive(pg.pid), true, `postgres pid ${pg.pid}`);
    assert.ok(pg.password.length >= 8, "a per-run password");
    for (const hit of [false, true]) {
      const r = await get(`${base}/test?stores=hyperdrive,postgres&key=dev-postgres`, 60_000);
      assert.equal(r.status, 200, r.body);
      const stores = JSON.parse(r.body).stores;
      for (const name of ["hyperdrive", "postgres"]) {
        assert.equal(stores[name].error, null, `${name}: ${r.body}`);
        assert.equal(typeof stores[name].read_ms, "number", `${name}: ${r.body}`);
        assert.equal(stores[name].hit, hit, `${name}: ${r.body}`);
      }
    }

    // wrangler runs each worker's build command again at start (4.164: once; 4.86 ran it twice,
    // once more when its file watcher was ready): each must reuse the one build dev.sh made.
    await until("wrangler's start-up builds", 300_000, () =>
      !building() && count(workerLog(), WORKER_REUSED) >= 1 && count(workerLog(), REPORT_REUSED) >= 1,
    );
    const all = devOut() + workerLog();
    assert.equal(count(all, WORKER_BUILD), 1, `benchmark worker builds:\n${all.slice(-4000)}`);
    assert.equal(count(all, REPORT_BUILD), 1, `report worker builds:\n${all.slice(-4000)}`);
    assert.doesNotMatch(all, /Blocking waiting for file lock.*\n.*worker-build/);

    // The local fleet: three members in workerd processes of their own, each called by the
    // probes and each answer kept under its label.
    assert.ok(pids.length >= 7, `services and members: ${pids}`);
    await until("an answer kept from every local member", 180_000, async () => {
      stillUp();
      const r = await get(`${base}/probes/answers`, 30_000);
      if (r.status !== 200) return false;
      const kept = r.body.split("\n").filter(Boolean).map((l) => JSON.parse(l));
      const labels = new Set(kept.filter((l) => l.vantage === "member" && l.answer).map((l) => l.label));
      return ["local-1", "local-2", "local-3"].every((l) => labels.has(l));
    });

    // A busy machine: two CPU-bound processes (one per core here), each stopping by itself.
    const hogs = [0, 1].map(() =>
      spawn(process.execPath, ["-e", "const end = Date.now() + 150000; while (Date.now() < end) {}"], { stdio: "ignore" }),
    );
    // A benchmark at saturation: 30 clients, back to back, 1 MiB values, for 150 s at most.
    const loadStart = Date.now();
    const loadEnd = loadStart + 150_000;
    // Each request may wait long (30 clients share two busy cores and a rebuild holds requests):
    // the bound tells a lost answer from a slow one, and every answer must come.
    const statuses = {};
    const lost = [];
    const storeErrors = {};
    let stop = false;
    const client = async () => {
      while (!stop && Date.now() < loadEnd) {
        const sent = Date.now();
        const r = await get(`${base}/test?min_bytes=1048576&max_bytes=1048576&stores=do,r2`, 180_000);
        statuses[r.status] = (statuses[r.status] || 0) + 1;
        if (r.status !== 200) {
          lost.push(`${r.status} sent at +${sent - loadStart} ms, after ${Date.now() - sent} ms: ${r.body.slice(0, 200)}`);
          continue;
        }
        for (const [name, store] of Object.entries(JSON.parse(r.body).stores)) {
          const key = `${name}: ${String(store.error).slice(0, 80)}`;
          if (store.error !== null) storeErrors[key] = (storeErrors[key] || 0) + 1;
        }
      }
    };
    let edited = 0;
    let rebuilt = 0;
    const load = Array.from({ length: 30 }, client);
    try {
      await sleep(20_000);
      stillUp();
      // An edit under src/ while all that runs: wrangler rebuilds (cargo recompiles the crate; the
      // wasm is the same, so the bundle is reused) and the worker answers again.
      const restartsBefore = count(workerLog(), /restarting build/g);
      const reusedBefore = count(workerLog(), WORKER_REUSED) + count(workerLog(), WORKER_BUILD);
      const now = new Date();
      fs.utimesSync(path.join(ROOT, "src/lib.rs"), now, now);
      edited = Date.now();
      await until("the rebuild after the edit", 600_000, () => {
        stillUp();
        const log = workerLog();
        return count(log, /restarting build/g) > restartsBefore &&
          count(log, WORKER_REUSED) + count(log, WORKER_BUILD) > reusedBefore && !building();
      });
      rebuilt = Date.now();
      stillUp();
    } finally {
      await sleep(Math.min(20_000, Math.max(0, loadEnd - Date.now())));
      stop = true;
      await Promise.all(load);
      for (const h of hogs) h.kill("SIGKILL");
    }
    stillUp();
    console.log(`# dev: under load ${JSON.stringify(statuses)}; store errors ${JSON.stringify(storeErrors)}; edit at +${edited - loadStart} ms, rebuilt at +${rebuilt - loadStart} ms`);
    assert.ok((statuses[200] || 0) > 0, `answers under load: ${JSON.stringify(statuses)}`);
    assert.deepEqual(lost, [], `answers lost under load, ${JSON.stringify(statuses)}`);
    // The stack answers again once the load is over: one request, not retried. A lost answer
    // (2 of ~6 fresh clones on wrangler 4.86; none in 7 runs on 4.164) fails here, printed with
    // what the stack was doing while it waited.
    const seen = [];
    const look = setTimeout(() => seen.push(stackLook(port, pids, workerLog())), 20_000);
    const sent = Date.now();
    const after = await get(`${base}/test?stores=kv,do`, 120_000);
    clearTimeout(look);
    if (after.status !== 200) {
      console.log(`# dev: /test after the rebuild: status ${after.status} after ${Date.now() - sent} ms: ${after.body.slice(0, 200)}`);
      for (const line of [...seen, stackLook(port, pids, workerLog())].join("\n").split("\n")) console.log(`#   ${line}`);
    }
    assert.equal(after.status, 200, after.body);
    assert.equal(JSON.parse(after.body).stores.kv.error, null, after.body);
  } finally {
    if (exited === null) {
      dev.kill("SIGTERM");
      await until("dev.sh to stop", 60_000, () => exited !== null).catch(() => dev.kill("SIGKILL"));
    }
    fs.closeSync(out);
  }
  // Ctrl-C's path: every process the stack started is gone, its ports are free.
  for (const pid of pids) assert.equal(alive(pid), false, `pid ${pid} outlived the stack`);
  assert.match(devOut(), /stopping the stack/);
  // PostgreSQL (pg_ctl's server, not a child of the stack) is stopped by its PID too, its data
  // removed; its password is in no log, nor in the banner or the generated wrangler config.
  assert.ok(pg, "the Postgres checks ran");
  assert.equal(alive(pg.pid), false, `postgres pid ${pg.pid} outlived the stack`);
  assert.equal(fs.existsSync(pg.data), false, `${pg.data} left behind`);
  const printed = fs.readdirSync(stackDir).filter((f) => f.endsWith(".log") || f.endsWith(".jsonc"));
  assert.ok(printed.includes("worker.log") && printed.includes("kvbench.jsonc"), `${printed}`);
  for (const [name, text] of [["dev's output", devOut()], ...printed.map((f) => [f, fs.readFileSync(path.join(stackDir, f), "utf8")])]) {
    assert.equal(text.includes(pg.password), false, `the Postgres password is printed in ${name}`);
  }
  fs.rmSync(scratch, { recursive: true, force: true });
});
