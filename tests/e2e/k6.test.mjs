// k6 as the engine, end to end: k6/kvbench.js drives the built worker (Miniflare KV + Upstash REST
// through our gateway over a real redis-server) for a few seconds, and `kvbench import k6` must
// account for every answer the server side served. The worker is reached through a counting
// front that records what was actually served (and injects some non-200s and malformed 200s), so
// the check does not rely on k6's own summary. Then the same k6 output, damaged the way a real
// file gets damaged (garbage lines, a run cut short mid-line), must import with the damage
// counted and nothing else lost.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { ROOT, startRedis, startGateway, startWorker, stop, freePort } from "./procs.mjs";

const K6_BIN = process.env.K6_BIN ?? path.join(ROOT, ".tools/k6/bin/k6");
const KVBENCH_BIN = process.env.KVBENCH_BIN ?? path.join(ROOT, "target/debug/kvbench");
const TOKEN = "k6-e2e-token-" + process.pid;
const RATE = 25;
const SECONDS = 4;

let redis, gateway, mf, front, work;
/** What the front served, counted on the server side. */
const served = { requests: 0, answered: 0, http503: 0, malformed: 0, stores: {}, reads: {}, writes: {}, errors: {} };

function count(map, key) {
  map[key] = (map[key] ?? 0) + 1;
}

/** Every 11th request answers 503 and every 13th a 200 that is not an answer, without reaching the worker. */
async function serve(req, res) {
  const n = ++served.requests;
  if (n % 11 === 0) {
    served.http503++;
    res.writeHead(503, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: { parameter: "", message: "injected by the test front" } }));
    return;
  }
  if (n % 13 === 0) {
    served.malformed++;
    res.writeHead(200, { "content-type": "application/json" });
    res.end("{\"not\": \"an answer\"");
    return;
  }
  const upstream = await mf.dispatchFetch(`http://localhost${req.url}`);
  const body = await upstream.text();
  if (upstream.status === 200) {
    const a = JSON.parse(body);
    served.answered++;
    for (const [name, s] of Object.entries(a.stores)) {
      count(served.stores, name);
      if (s.read_ms != null) count(served.reads, name);
      if (s.write_ms != null) count(served.writes, name);
      if (s.error) count(served.errors, `${name} ${s.error.kind}/${s.error.op ?? ""}`);
    }
  }
  res.writeHead(upstream.status, { "content-type": "application/json" });
  res.end(body);
}

function run(bin, args, { timeoutMs = 120_000, env = {} } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err = (err + d).slice(-8000)));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("error", reject);
    child.on("exit", (code, sig) => {
      clearTimeout(timer);
      resolve({ code, sig, out, err });
    });
  });
}

before(async () => {
  assert.ok(fs.existsSync(K6_BIN), `k6 not found at ${K6_BIN}: run npm run setup (or set K6_BIN)`);
  assert.ok(fs.existsSync(KVBENCH_BIN), `kvbench not found at ${KVBENCH_BIN}: cargo build -p kvbench`);
  work = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-k6-"));
  redis = await startRedis();
  gateway = await startGateway(redis.port, TOKEN);
  // k6/kvbench.js keeps its answers under a run id, which needs a token or BENCH_OPEN.
  mf = await startWorker({ UPSTASH_REDIS_REST_URL: gateway.url, UPSTASH_REDIS_REST_TOKEN: TOKEN, BENCH_OPEN: "true" });
  const port = await freePort();
  front = http.createServer((req, res) => {
    serve(req, res).catch((e) => {
      res.writeHead(500);
      res.end(String(e));
    });
  });
  await new Promise((r) => front.listen(port, "127.0.0.1", r));
  front.url = `http://127.0.0.1:${port}/test`;
});

after(async () => {
  await new Promise((r) => (front ? front.close(r) : r()));
  await mf?.dispose();
  await stop(gateway?.proc);
  await stop(redis?.proc);
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

function readReport(dir) {
  return JSON.parse(fs.readFileSync(path.join(dir, "report.json"), "utf8"));
}

async function importK6(file, out) {
  const r = await run(KVBENCH_BIN, ["import", "k6", file, "--out", out, "--label", "local"]);
  assert.equal(r.code, 0, `kvbench import k6 failed:\n${r.err}\n${r.out}`);
  return readReport(out);
}

test("k6 against the local stack, imported: every count equals what the server served", { timeout: 180_000 }, async () => {
  const json = path.join(work, "k6.json");
  const r = await run(K6_BIN, [
    "run", "--quiet", "--no-usage-report",
    "-e", `KVBENCH_URL=${front.url}`,
    "-e", "KVBENCH_QUERY=stores=kv,upstash&keys=40",
    "-e", `KVBENCH_RATE=${RATE}`,
    "-e", `KVBENCH_DURATION=${SECONDS}s`,
    "--out", `json=${json}`,
    path.join(ROOT, "k6/kvbench.js"),
  ]);
  assert.equal(r.code, 0, `k6 failed:\n${r.err}`);
  assert.ok(served.answered > RATE * SECONDS * 0.7, `only ${served.answered} answers served`);

  const report = await importK6(json, path.join(work, "clean"));
  const t = report.total;
  assert.equal(t.answered, served.answered, "imported answers = /test answers served");
  assert.equal(t.failures.http_503 ?? 0, served.http503);
  assert.equal(t.failures.malformed ?? 0, served.malformed);
  assert.equal(t.sent, served.requests, "every request the server saw was sent");
  assert.equal(t.scheduled, t.sent + (t.failures.not_sent ?? 0));
  for (const [name, n] of Object.entries(served.stores)) {
    const s = t.stores[name];
    assert.ok(s, `store ${name} missing from the report`);
    assert.equal(s.answers, n, `${name}: answers`);
    assert.equal(s.reads, served.reads[name] ?? 0, `${name}: reads`);
    assert.equal(s.writes, served.writes[name] ?? 0, `${name}: writes`);
  }
  assert.deepEqual(Object.keys(t.stores).sort(), Object.keys(served.stores).sort());
  const run0 = report.runs[0];
  assert.equal(run0.engine, "k6");
  assert.equal(run0.latency_from, "sent");
  assert.equal(run0.requested_rate, RATE);
  assert.equal(run0.import.malformed_lines, 0);
  assert.equal(run0.import.incomplete_requests, 0);
  assert.equal(run0.import.truncated, false);
  assert.ok(!JSON.stringify(report).includes(TOKEN), "no secret in the report");
  for (const f of ["report.html", "timeline.svg", "timeline-hits.svg", "latency.svg"]) {
    assert.ok(fs.statSync(path.join(work, "clean", f)).size > 1000, f);
  }
  // The per-request summary the page shows comes with the file.
  assert.equal(report.summary.latency[0].count, t.answered + served.http503 + served.malformed);

  // The same output, damaged: garbage lines in the middle, and the run cut short inside the
  // closing point of a request whose store points were already written.
  const lines = fs.readFileSync(json, "utf8").split("\n").filter((l) => l.length > 0);
  const lastMarker = lines.findLastIndex((l) => l.startsWith('{"metric":"kvbench_request_ms"') && l.includes('"outcome":"ok"'));
  assert.ok(lastMarker > 0, "an ok request in the k6 output");
  const garbage = ["not json at all", '{"metric":"kvbench_request_ms","type":"Point","data":{"time":"yesterday","value":1}}', "{}", '{"type":"Point"}', "\u0000\u0001"];
  const kept = lines.slice(0, lastMarker);
  const step = Math.floor(kept.length / garbage.length);
  const damaged = [];
  kept.forEach((l, i) => {
    damaged.push(l);
    if (i % step === 0 && garbage.length > 0) damaged.push(garbage.shift());
  });
  assert.equal(garbage.length, 0, "every garbage line went in");
  const cut = lines[lastMarker].slice(0, Math.floor(lines[lastMarker].length / 2));
  const damagedFile = path.join(work, "damaged.json");
  fs.writeFileSync(damagedFile, damaged.join("\n") + "\n" + cut);
  const d = await importK6(damagedFile, path.join(work, "damaged"));
  const info = d.runs[0].import;
  assert.equal(info.truncated, true);
  assert.equal(info.malformed_lines, 5 + 1, "five garbage lines and the cut one");
  // Nothing else lost: every request completed before the cut is there, with its stores.
  const pending = new Map();
  let okKept = 0;
  let failedKept = 0;
  const storesKept = {};
  for (const l of kept) {
    const p = JSON.parse(l);
    if (p.type !== "Point") continue;
    const id = p.data?.metadata?.kvbench_req;
    if (p.metric === "kvbench_store_value_bytes") {
      if (!pending.has(id)) pending.set(id, []);
      pending.get(id).push(p.data.tags.store);
    } else if (p.metric === "kvbench_request_ms") {
      if (p.data.tags.outcome === "ok") {
        okKept++;
        for (const s of pending.get(id) ?? []) count(storesKept, s);
      } else {
        failedKept++;
      }
      pending.delete(id);
    }
  }
  assert.ok(pending.size >= 1);
  assert.equal(info.incomplete_requests, pending.size, "requests whose closing point never came");
  assert.equal(d.total.answered, okKept);
  const failedDamaged = Object.entries(d.total.failures)
    .filter(([k]) => k !== "not_sent")
    .reduce((sum, [, n]) => sum + n, 0);
  assert.equal(failedDamaged, failedKept);
  for (const [name, n] of Object.entries(storesKept)) assert.equal(d.total.stores[name].answers, n, name);
});

test("gzip output imports the same as plain", { timeout: 60_000 }, async () => {
  const plain = path.join(work, "k6.json");
  assert.ok(fs.existsSync(plain), "the first test wrote k6.json");
  const { gzipSync } = await import("node:zlib");
  const gz = path.join(work, "k6.json.gz");
  fs.writeFileSync(gz, gzipSync(fs.readFileSync(plain)));
  const a = readReport(path.join(work, "clean"));
  const b = await importK6(gz, path.join(work, "gz"));
  assert.deepEqual(b.total, a.total);
  assert.deepEqual(b.summary, a.summary);
});
