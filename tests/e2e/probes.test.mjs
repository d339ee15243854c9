// The deployed worker measuring itself, under Miniflare's real Durable Objects, alarms and
// scheduled events: probes in three hints on a 1 s interval with KV, D1, R2, the Durable Object
// store and Redis over TCP (a real redis-server), started by POST and by the cron, every answer
// kept and streamed back by /probes/answers exactly as kept; stop; /test?run= keeps a run's
// answers after the response, /runs/<id>/answers returns exactly the requests sent; bad input
// is a 400 naming the parameter, an unknown run a 404; a restart of the stack loses nothing kept
// (persisted Durable Object storage). Run `npm run build` first (scripts/test.sh does).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { ROOT, sleep, startRedis, startStack as startWorker, stop, assertMs } from "./procs.mjs";
import { assertRan, cells, chromium, consoleLines, expectedCells, mismatches, pageRequests, skip } from "./browser.mjs";

const KVBENCH_BIN = process.env.KVBENCH_BIN ?? path.join(ROOT, "target/debug/kvbench");

/** `kvbench import worker` against the running worker's URL; its exit code, output, report. */
async function importWorker(args, env = {}) {
  const url = (await mf.ready).toString();
  const out = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-import-worker-"));
  const r = spawnSync(KVBENCH_BIN, ["import", "worker", url, ...args, "--out", out], {
    encoding: "utf8",
    env: { ...process.env, ...env },
    timeout: 120_000,
  });
  const file = path.join(out, "report.json");
  const report = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, "utf8")) : null;
  fs.rmSync(out, { recursive: true, force: true });
  return { code: r.status, out: `${r.stdout}${r.stderr}`, report };
}

const HINTS = "weur,enam,apac";
let redis;
let mf;
let persist;
let vars;

before(async () => {
  redis = await startRedis();
  persist = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-probes-"));
  vars = {
    REDIS_URL: `redis://127.0.0.1:${redis.port}`,
    STORES: "kv,do,d1,r2,cache,redis",
    PROBE_HINTS: HINTS,
    PROBE_EVERY: "1",
    PROBE_COLO_URL: "none",
    BENCH_OPEN: "true",
    // Loopback: nothing is billed, and every=1 is far over the default budget.
    PROBE_BUDGET_USD: "1000000",
  };
  mf = await startWorker(vars, { resourcePersistencePath: persist, host: "127.0.0.1", port: 0 });
});
after(async () => {
  await mf?.dispose();
  await stop(redis?.proc);
  fs.rmSync(persist, { recursive: true, force: true });
});

async function call(method, p, headers = {}) {
  const res = await mf.dispatchFetch(`http://localhost${p}`, { method, headers });
  return { res, text: await res.text() };
}
const json = async (method, p) => {
  const { res, text } = await call(method, p);
  return { status: res.status, body: JSON.parse(text) };
};
function lines(text) {
  return text.split("\n").filter(Boolean).map((l) => JSON.parse(l));
}

async function waitFor(what, tries, ok) {
  for (let i = 0; i < tries; i++) {
    const v = await ok();
    if (v) return v;
    await sleep(250);
  }
  throw new Error(`timed out waiting for ${what}`);
}

test("HEAD works on every GET route: the GET's status and headers, no body", async () => {
  for (const p of ["/", "/healthz", "/probes", "/probes/answers", "/runs/never-kept/answers", "/report?window=1h"]) {
    const get = await mf.dispatchFetch(`http://localhost${p}`);
    await get.arrayBuffer();
    const head = await mf.dispatchFetch(`http://localhost${p}`, { method: "HEAD" });
    assert.equal(head.status, get.status, `HEAD ${p}`);
    assert.notEqual(head.status, 405, `HEAD ${p}`);
    assert.equal(head.headers.get("content-type"), get.headers.get("content-type"), `HEAD ${p}`);
    assert.equal((await head.arrayBuffer()).byteLength, 0, `HEAD ${p} has a body`);
  }
});

test("probes start, measure every store from every hint, and keep each answer", async () => {
  const started = await json("POST", "/probes/start");
  assert.equal(started.status, 200, JSON.stringify(started.body));
  assert.deepEqual(started.body.probes.map((p) => p.hint), HINTS.split(","));
  await waitFor("3 answers from every probe", 120, async () => {
    const { body } = await json("GET", "/probes");
    return body.probes.every((p) => p.kept >= 3) && body;
  });
  const { body: status } = await json("GET", "/probes");
  assert.equal(status.every_s, 1);
  for (const p of status.probes) {
    assert.equal(p.running, true, JSON.stringify(p));
    assert.equal(p.colo, "unknown", "locally the colo cannot be told");
    assert.equal(p.last_error, null, JSON.stringify(p));
    assert.equal(p.keep_failed, 0, "every measured answer kept");
    assert.ok(p.last_t_ms > 0);
  }

  const { res, text } = await call("GET", "/probes/answers");
  assert.equal(res.headers.get("content-type"), "application/x-ndjson");
  const all = lines(text);
  const end = all.pop();
  assert.deepEqual(end, { end: true, lines: all.length, keep_failed: 0 });
  for (const hint of HINTS.split(",")) {
    const mine = all.filter((l) => l.label === hint);
    assert.ok(mine.length >= 3, `${hint}: ${mine.length} answers`);
    assert.equal(mine[0].cold, true, "the first answer after a wake is cold");
    assert.ok(mine.slice(1).every((l) => l.cold === false), "later answers are hot");
    const seqs = mine.map((l) => l.seq);
    assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), "in order");
    for (const l of mine) {
      assert.equal(l.hint, hint);
      assert.equal(l.colo, "unknown");
      assert.equal(l.answer.colo, "unknown");
      assert.deepEqual(Object.keys(l.answer.stores).sort(), ["cache", "d1", "do", "kv", "r2", "redis"]);
      // `do` is measured at an object of the probe's own hint, and the answer says so.
      assert.equal(l.answer.stores.do.location_hint, hint);
      for (const s of ["kv", "do", "d1", "r2", "redis"]) {
        const r = l.answer.stores[s];
        assert.equal(r.error, null, `${s}: ${JSON.stringify(r.error)}`);
        assertMs(r.read_ms, `${s}: ${JSON.stringify(r)}`);
        assert.equal(typeof r.hit, "boolean", `${s}: ${JSON.stringify(r)}`);
        assert.ok(r.value_bytes >= 4096 && r.value_bytes <= 65536);
      }
      // The Cache API is reported as not measurable from a probe, with the reason.
      assert.equal(l.answer.stores.cache.error.kind, "not_configured");
      assert.match(l.answer.stores.cache.error.message, /Durable Object alarm has no request/);
    }
  }
  // A window: only answers from `since` on.
  const cut = all[Math.floor(all.length / 2)].t_ms;
  const later = lines((await call("GET", `/probes/answers?since=${cut}`)).text);
  later.pop();
  assert.deepEqual(later.map((l) => l.seq + l.label).sort(), all.filter((l) => l.t_ms >= cut).map((l) => l.seq + l.label).sort());

  // What the probes wrote is in the real redis-server: the redis answers' writes happened.
  const writes = all.filter((l) => l.answer.stores.redis.write_ms !== null).length;
  assert.ok(writes >= 1);

  const stopped = await json("POST", "/probes/stop");
  assert.equal(stopped.status, 200);
  const { body: after } = await json("GET", "/probes");
  assert.ok(after.probes.every((p) => p.running === false && p.stopped === true));
  // What a stopped probe kept still expires: its alarm stays, set for when its oldest answer is
  // due (keep plus the hour's grace), and measures nothing (the count below stays).
  for (const p of after.probes) {
    assert.ok(p.kept > 0 && p.keep_s >= 60, JSON.stringify(p));
    assert.equal(p.next_alarm_ms, p.first_t_ms + (p.keep_s + 3600) * 1000, JSON.stringify(p));
  }
  const kept = after.probes.map((p) => p.kept);
  await sleep(2500);
  const { body: still } = await json("GET", "/probes");
  assert.deepEqual(still.probes.map((p) => p.kept), kept, "a stopped probe answers no more");
  // The cron does not restart a stopped probe.
  await (await mf.getWorker()).scheduled({ cron: "*/5 * * * *" });
  await sleep(1500);
  const { body: cron } = await json("GET", "/probes");
  assert.deepEqual(cron.probes.map((p) => p.kept), kept);

  // Cross-checked against what the real redis-server served: its GETs and SETs are exactly the
  // kept answers' redis reads and writes (nothing else used this server yet).
  const final = lines((await call("GET", "/probes/answers")).text).filter((l) => l.answer);
  const stats = await redisInfo(redis.port, "commandstats");
  const calls = (cmd) => Number(stats.match(new RegExp(`cmdstat_${cmd}:calls=(\\d+)`))?.[1] ?? 0);
  const redisReads = final.filter((l) => l.answer.stores.redis.read_ms !== null).length;
  const redisWrites = final.filter((l) => l.answer.stores.redis.write_ms !== null).length;
  assert.equal(calls("get"), redisReads, "redis GETs vs kept reads");
  assert.equal(calls("set"), redisWrites, "redis SETs vs kept writes");
});

/** `INFO <section>` of a redis-server, as text. */
function redisInfo(port, section) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, "127.0.0.1");
    let buf = "";
    sock.setTimeout(5000, () => {
      sock.destroy();
      reject(new Error("redis INFO timed out"));
    });
    sock.on("connect", () => sock.write(`INFO ${section}\r\n`));
    sock.on("data", (d) => {
      buf += d;
      const m = buf.match(/^\$(\d+)\r\n/);
      if (m && Buffer.byteLength(buf) >= m[0].length + Number(m[1])) {
        sock.destroy();
        resolve(buf);
      }
    });
    sock.on("error", reject);
  });
}

test("GET /report is kvbench's report.html over the probes' window, and the same numbers", { skip }, async () => {
  // The probes are stopped (previous test): the window's answers no longer change.
  const { res, text } = await call("GET", "/report?window=1h");
  assert.equal(res.status, 200, text.slice(0, 500));
  assert.match(res.headers.get("content-type"), /^text\/html/);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-e2e-report-url-"));
  try {
    const page = path.join(dir, "report.html");
    fs.writeFileSync(page, text);
    const netlog = path.join(dir, "netlog.json");
    const r = await chromium(path.join(dir, "profile"), netlog, ["--dump-dom", `file://${page}`]);
    assertRan("chromium --dump-dom", r);
    assert.deepEqual(consoleLines(r.stderr), [], "the page logged to the console");
    assert.deepEqual(pageRequests(netlog), [], "the page made network requests");
    const dom = r.stdout;
    assert.ok(dom.includes("<h1>kvbench report</h1>"));
    assert.equal((dom.match(/<svg[\s>]/gi) ?? []).length, 3, "the three charts inline");
    // The same answers through kvbench import worker: every figure cell agrees.
    const imported = await importWorker(["--probes"]);
    assert.equal(imported.code, 0, imported.out);
    assert.deepEqual(
      imported.report.runs.map((x) => x.label).sort(),
      HINTS.split(",").sort(),
      "regions as labels",
    );
    assert.deepEqual(mismatches(cells(dom), expectedCells(imported.report)), []);
    // Its report.json (?format=json): the same figures, and where they come from.
    const asJson = await call("GET", "/report?window=1h&format=json");
    assert.equal(asJson.res.status, 200, asJson.text.slice(0, 500));
    assert.match(asJson.res.headers.get("content-type"), /^application\/json/);
    const served = JSON.parse(asJson.text);
    assert.deepEqual(mismatches(cells(dom), expectedCells(served)), []);
    const p = served.provenance;
    assert.equal(p.stack, "local", JSON.stringify(p));
    assert.match(p.build.commit, /^([0-9a-f]{12}(-dirty)?|unknown)$/);
    for (const k of ["wrangler", "workerd", "workers-rs", "redis-server"]) assert.ok(p.build[k], `build names ${k}: ${JSON.stringify(p.build)}`);
    assert.equal(p.settings.keys, "1000");
    assert.ok(p.window[0] < p.window[1], JSON.stringify(p.window));
    assert.deepEqual(p.raw.map((r) => new URL(r.href).pathname), ["/probes/answers", "/report"]);
    assert.ok(dom.includes("How this was measured") && dom.includes(p.build.commit), "the page names its build");
    assert.match(dom, /Measured on the local stack \(this machine\)/);
    // The vantage × store table: a row per region, each store's cell, the counts.
    const rows = new Set(cells(dom).filter((c) => c.row.startsWith("vantage ")).map((c) => c.row));
    assert.deepEqual([...rows].sort(), HINTS.split(",").sort().map((h) => `vantage ${h}`), "a row per region");
    for (const h of HINTS.split(",")) {
      const v = imported.report.vantages[h];
      assert.deepEqual([v.vantage, v.hint, v.failed], ["hint", h, 0], JSON.stringify(v));
      assert.ok(v.cold >= 1 && v.warm >= 1, JSON.stringify(v));
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  // A page view within a minute is the cached page.
  const again = await call("GET", "/report?window=1h");
  assert.equal(again.text, text);
  for (const [q, parameter] of [["window=5", "window"], ["window=30d", "window"], ["window=x", "window"], ["w=1h", "w"], ["format=xml", "format"], ["format=json&format=html", "format"]]) {
    const { status, body } = await json("GET", `/report?${q}`);
    assert.equal(status, 400, q);
    assert.equal(body.error.parameter, parameter, q);
  }
  // GET /probes carries the projected bill, priced by kvbench's cost model.
  const { body } = await json("GET", "/probes");
  const bill = body.bill;
  assert.ok(bill.monthly_usd > 0, JSON.stringify(bill));
  // Three probes waking every second, each wake one warm answer and, in a new instance, a cold
  // one besides: answers per wake are measured.
  const wakes = 3 * 2_592_000;
  assert.equal(bill.wakes_per_month, wakes);
  assert.ok(bill.answers_per_wake >= 1 && bill.answers_per_wake <= 2, JSON.stringify(bill));
  assert.ok(Math.abs(bill.project_rps - 3 * bill.answers_per_wake) < 0.01, JSON.stringify(bill));
  // Projected from the answers kept when it was computed (it is reused for a minute).
  assert.ok(bill.measured_answers >= 1);
  assert.deepEqual(bill.stores.map((s) => s.store).sort(), ["d1", "do", "kv", "r2", "redis"]);
  assert.ok(bill.stores.every((s) => !s.historical), "current plans only");
  assert.equal(bill.probes.requests_per_month, wakes + (3 * 2_592_000) / 300, "alarms plus cron checks");
  // Rows: the state and the alarm per wake, each answer's row and its deletion.
  assert.ok(Math.abs(bill.probes.rows_written_per_month - (wakes * 2 + bill.answers_per_month * 2)) <= 2, JSON.stringify(bill));
  // The kept answers at rest are priced (DO storage).
  assert.ok(bill.probes.stored_gb > 0, JSON.stringify(bill));
});

test("the cron re-arms probes that are not stopped; a restart keeps every answer", async () => {
  // A probe never started by POST (`sam`, after a restart with another PROBE_HINTS): the cron
  // starts it.
  const before = lines((await call("GET", "/probes/answers")).text);
  before.pop();
  await mf.dispose();
  mf = await startWorker({ ...vars, PROBE_HINTS: "sam" }, { resourcePersistencePath: persist });
  await (await mf.getWorker()).scheduled({ cron: "*/5 * * * *" });
  await waitFor("a sam answer from the cron", 120, async () => {
    const { body } = await json("GET", "/probes");
    return body.probes[0].kept >= 1 && body;
  });
  await json("POST", "/probes/stop");
  // Back to the first hints: everything kept before the restart is still there.
  await mf.dispose();
  mf = await startWorker(vars, { resourcePersistencePath: persist, host: "127.0.0.1", port: 0 });
  const afterRestart = lines((await call("GET", "/probes/answers")).text);
  afterRestart.pop();
  const key = (l) => `${l.label}:${l.seq}`;
  const now = new Set(afterRestart.map(key));
  for (const l of before.filter((l) => HINTS.includes(l.label))) assert.ok(now.has(key(l)), `lost ${key(l)}`);
});

test("the cron arms nothing over budget, and the same tick under budget arms the probe", async () => {
  // `oc`: a hint no earlier test started, so it has no state and no alarm; every=1 s costs far
  // more than $0.01 a month.
  await mf.dispose();
  mf = await startWorker({ ...vars, PROBE_HINTS: "oc", PROBE_BUDGET_USD: "0.01" }, { resourcePersistencePath: persist });
  const { body: view } = await json("GET", "/probes");
  assert.equal(view.cron.arms, false, JSON.stringify(view.cron));
  assert.match(view.cron.why, /PROBE_BUDGET_USD/, JSON.stringify(view.cron));
  await (await mf.getWorker()).scheduled({ cron: "*/5 * * * *" });
  // An armed probe at every=1 s keeps its first answer within a second or two.
  await sleep(4000);
  const held = (await json("GET", "/probes")).body.probes.find((p) => p.hint === "oc");
  assert.ok(held, "oc is listed");
  assert.equal(held.running, false, `the tick over budget armed oc: ${JSON.stringify(held)}`);
  assert.equal(held.kept, 0, `the tick over budget measured: ${JSON.stringify(held)}`);
  // The same tick, the budget raised: the check is what held it back.
  await mf.dispose();
  mf = await startWorker({ ...vars, PROBE_HINTS: "oc" }, { resourcePersistencePath: persist });
  await (await mf.getWorker()).scheduled({ cron: "*/5 * * * *" });
  await waitFor("an oc answer from the cron under budget", 120, async () => {
    const oc = (await json("GET", "/probes")).body.probes.find((p) => p.hint === "oc");
    return oc?.kept >= 1 && oc;
  });
  assert.equal((await json("POST", "/probes/stop")).status, 200);
  await mf.dispose();
  mf = await startWorker(vars, { resourcePersistencePath: persist, host: "127.0.0.1", port: 0 });
});

test("a start's interval persists: the cron's tick does not put the vars' back", async () => {
  const started = await json("POST", "/probes/start?every=7&keep=2d");
  assert.equal(started.status, 200, JSON.stringify(started.body));
  await (await mf.getWorker()).scheduled({ cron: "*/5 * * * *" });
  await sleep(500);
  const { body } = await json("GET", "/probes");
  // The configured ones (a hint started beyond PROBE_HINTS earlier is listed apart, stopped).
  for (const p of body.probes.filter((p) => !p.outside)) assert.deepEqual([p.every_s, p.keep_s], [7, 172800], JSON.stringify(p));
  assert.equal((await json("POST", "/probes/stop")).status, 200);
});

test("/test?run= keeps exactly the answers sent, after the response", async () => {
  const run = `e2e-${Date.now()}`;
  const sent = [];
  for (let i = 0; i < 12; i++) {
    const headers = i % 2 ? { "Kvbench-Run": run } : {};
    const q = i % 2 ? "?stores=kv,redis" : `?stores=kv,redis&run=${run}`;
    const { res, text } = await call("GET", `/test${q}`, headers);
    assert.equal(res.status, 200, text);
    sent.push(JSON.parse(text));
  }
  // A request of the run that is refused for its parameters is one of its answers too: kept as
  // a failure with its status, so the run's report counts it.
  const refused = await call("GET", `/test?stores=kv&max_bytes=lots&run=${run}`);
  assert.equal(refused.res.status, 400, refused.text);
  const got = await waitFor("13 kept lines", 40, async () => {
    const { res, text } = await call("GET", `/runs/${run}/answers`);
    if (res.status !== 200) return null;
    const l = lines(text);
    return l.length === 14 && l;
  });
  const end = got.pop();
  assert.deepEqual(end, { end: true, lines: 13, keep_failed: 0 });
  const failed = got.filter((l) => l.failure);
  assert.equal(failed.length, 1, JSON.stringify(failed));
  assert.deepEqual([failed[0].failure.kind, failed[0].failure.status], ["status", 400]);
  assert.match(failed[0].failure.detail, /max_bytes/);
  got.splice(got.indexOf(failed[0]), 1);
  // Shard by shard (RUN_SHARDS), not in the order sent: the same answers, each once.
  const byText = (list) => list.map((a) => JSON.stringify(a)).sort();
  assert.deepEqual(byText(got.map((l) => l.answer)), byText(sent), "every answer kept exactly as it was sent");
  const seqs = got.map((l) => l.seq);
  assert.deepEqual([...seqs].sort((a, b) => a - b), seqs, "seq rises through the stream");
  assert.equal(new Set(seqs).size, seqs.length, "seq is unique");
  for (const l of got) {
    assert.ok(l.label === l.answer.colo && l.hint === null, JSON.stringify({ ...l, answer: undefined }));
    assertMs(l.handler_ms, JSON.stringify({ ...l, answer: undefined }));
  }
  const unknown = await json("GET", "/runs/never-ran/answers");
  assert.equal(unknown.status, 404);
  assert.equal(unknown.body.error.parameter, "run");

  // kvbench import worker: exactly the requests sent, one label per colo, every store's reads.
  const imported = await importWorker(["--run", run]);
  assert.equal(imported.code, 0, imported.out);
  const r = imported.report;
  assert.equal(r.total.answered, 12);
  assert.equal(r.total.scheduled, 13);
  assert.deepEqual(r.total.failures, { http_400: 1 });
  assert.equal(r.runs.length, 1, "one label: the one colo of the local stack");
  assert.equal(r.runs[0].engine, "worker");
  assert.equal(r.runs[0].import.lines, 13);
  for (const s of ["kv", "redis"]) {
    assert.equal(r.total.stores[s].reads, 12, s);
    const writes = sent.filter((a) => a.stores[s].write_ms !== null).length;
    assert.equal(r.total.stores[s].writes, writes, s);
  }
  const missing = await importWorker(["--run", "never-ran"]);
  assert.notEqual(missing.code, 0);
  assert.match(missing.out, /no such run/);
  const bad = await importWorker(["--run", "a/b"]);
  assert.notEqual(bad.code, 0);
  assert.match(bad.out, /--run/);
});

test("a kvbench run with the Kvbench-Run header imports with exactly the requests it got answered", async () => {
  const run = `kvbench-run-${Date.now()}`;
  const url = (await mf.ready).toString().replace(/\/$/, "");
  const out = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-run-header-"));
  try {
    const r = spawnSync(
      KVBENCH_BIN,
      ["run", "--url", `${url}/test?stores=kv,redis`, "--rate", "20", "--duration", "2s", "--header", `Kvbench-Run: ${run}`, "--out", out],
      { encoding: "utf8", timeout: 120_000 },
    );
    assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
    const sent = JSON.parse(fs.readFileSync(path.join(out, "report.json"), "utf8"));
    assert.ok(sent.total.answered >= 30, `answered ${sent.total.answered}`);
    // The answers are kept after the responses (waitUntil): wait until all are.
    const kept = await waitFor("every answer kept", 40, async () => {
      const { res, text } = await call("GET", `/runs/${run}/answers`);
      if (res.status !== 200) return null;
      const l = lines(text);
      return l.length === sent.total.answered + 1 && l;
    });
    assert.ok(kept);
    const imported = await importWorker(["--run", run]);
    assert.equal(imported.code, 0, imported.out);
    assert.equal(imported.report.total.answered, sent.total.answered);
    for (const s of ["kv", "redis"]) {
      assert.equal(imported.report.total.stores[s].reads, sent.total.stores[s].reads, s);
      assert.equal(imported.report.total.stores[s].writes, sent.total.stores[s].writes, s);
    }
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
  }
});

test("kvbench import worker --probes reads every kept probe answer, one label per hint", async () => {
  const kept = lines((await call("GET", "/probes/answers")).text);
  kept.pop();
  const imported = await importWorker(["--probes"]);
  assert.equal(imported.code, 0, imported.out);
  const r = imported.report;
  assert.equal(r.total.answered, kept.length);
  assert.equal(r.runs[0].engine, "probes");
  const labels = r.runs.map((x) => x.label).sort();
  assert.deepEqual(labels, [...new Set(kept.map((l) => l.label))].sort());
  const reads = kept.filter((l) => l.answer.stores.kv.error === null).length;
  assert.equal(r.total.stores.kv.reads, reads);
  // A token set on the worker: refused without it, read with it from the env var, never printed.
  const locked = await startWorker({ ...vars, BENCH_TOKEN: "import-token-77aa" }, { resourcePersistencePath: persist, host: "127.0.0.1", port: 0 });
  const saved = mf;
  mf = locked;
  try {
    const refused = await importWorker(["--probes"]);
    assert.notEqual(refused.code, 0);
    assert.match(refused.out, /401/);
    const ok = await importWorker(["--probes", "--token-env", "KVB_TOKEN"], { KVB_TOKEN: "import-token-77aa" });
    assert.equal(ok.code, 0, ok.out);
    assert.ok(!ok.out.includes("import-token-77aa"));
  } finally {
    mf = saved;
    await locked.dispose();
  }
});

test("bad input is a 400 naming the parameter", async () => {
  const cases = [
    ["GET", "/probes/answers?since=yesterday", "since"],
    ["GET", "/probes/answers?until=1e3", "until"],
    ["GET", "/probes/answers?since=2000&until=1000", "until"],
    ["GET", "/probes/answers?limit=5", "limit"],
    ["GET", "/runs/a%20b/answers", "run"],
    ["GET", "/test?run=a/b", "run"],
    ["GET", "/test?run=", "run"],
    ["GET", "/test?run=..", "run"],
    ["GET", "/test?run=%2E%2E", "run"],
    ["POST", "/probes/start?hints=mars", "hints"],
    ["POST", "/probes/start?every=0", "every"],
    ["POST", "/probes/start?keep=5", "keep"],
    ["GET", "/probes?x=1", "x"],
  ];
  for (const [method, p, parameter] of cases) {
    const { status, body } = await json(method, p);
    assert.equal(status, 400, `${method} ${p}: ${JSON.stringify(body)}`);
    assert.equal(body.error.parameter, parameter, `${method} ${p}`);
  }
  const h = await call("GET", "/test?stores=kv", { "Kvbench-Run": "x y" });
  assert.equal(h.res.status, 400);
  assert.equal(JSON.parse(h.text).error.parameter, "Kvbench-Run");
  const wrongMethod = await call("GET", "/probes/start");
  assert.equal(wrongMethod.res.status, 405);
  assert.equal(wrongMethod.res.headers.get("allow"), "POST");
});

test("a hint started beyond PROBE_HINTS is listed and a plain stop stops it", async () => {
  const started = await json("POST", "/probes/start?hints=oc&every=1h");
  assert.equal(started.status, 200, JSON.stringify(started.body));
  const listed = await waitFor("oc listed as running", 20, async () => {
    const { body } = await json("GET", "/probes");
    const oc = body.probes.find((p) => p.label === "oc");
    return oc && oc.running && oc;
  });
  assert.match(listed.outside, /PROBE_HINTS/);
  assert.equal(listed.every_s, 3600);
  const stopped = await json("POST", "/probes/stop");
  assert.equal(stopped.status, 200, JSON.stringify(stopped.body));
  assert.ok(stopped.body.probes.some((p) => p.label === "oc"), JSON.stringify(stopped.body));
  const { body } = await json("GET", "/probes");
  const oc = body.probes.find((p) => p.label === "oc");
  assert.ok(!oc || !oc.running, JSON.stringify(oc));
});

test("the probe routes are behind BENCH_TOKEN when it is set", async () => {
  const locked = await startWorker({ ...vars, BENCH_TOKEN: "probe-token-31c9" });
  try {
    for (const [method, p] of [["GET", "/probes"], ["POST", "/probes/start"], ["POST", "/probes/stop"], ["GET", "/probes/answers"], ["GET", "/runs/x/answers"]]) {
      const res = await locked.dispatchFetch(`http://localhost${p}`, { method });
      assert.equal(res.status, 401, `${method} ${p}`);
      assert.ok(!(await res.text()).includes("probe-token-31c9"));
    }
    const ok = await locked.dispatchFetch("http://localhost/probes", { headers: { Authorization: "Bearer probe-token-31c9" } });
    assert.equal(ok.status, 200);
  } finally {
    await locked.dispose();
  }
});
