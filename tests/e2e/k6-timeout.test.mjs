// k6's request timeout and end-to-end definition in k6/kvbench.js. The timeout is the worker's
// worst case for the URL, the same rule `kvbench run` uses for its default --timeout
// (crates/cli/src/args.rs, worst_case_timeout): the script's copy of the rule is checked on the
// Rust test's table, then k6 itself runs against a local server that holds its answer, so the
// timeout is shown to be the one k6 applies (k6's own default, 60 s, would wait for it).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { ROOT, freePort } from "./procs.mjs";

const K6_BIN = process.env.K6_BIN ?? path.join(ROOT, ".tools/k6/bin/k6");
const SCRIPT = path.join(ROOT, "k6/kvbench.js");

let server, base, work;

before(async () => {
  assert.ok(fs.existsSync(K6_BIN), `k6 not found at ${K6_BIN}: run npm run setup (or set K6_BIN)`);
  work = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-k6-timeout-"));
  const port = await freePort();
  // Answers a valid /test answer after `hold_ms` (from the query).
  server = http.createServer((req, res) => {
    const hold = Number(new URL(req.url, "http://x").searchParams.get("hold_ms") ?? 0);
    const timer = setTimeout(() => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ key: "1", colo: "LOCAL", order: ["kv"], stores: { kv: { read_ms: 1, hit: true, value_bytes: 1, write_ms: null, error: null } } }));
    }, hold);
    res.on("close", () => clearTimeout(timer));
  });
  await new Promise((r) => server.listen(port, "127.0.0.1", r));
  base = `http://127.0.0.1:${port}/test`;
});

after(async () => {
  server?.closeAllConnections();
  await new Promise((r) => (server ? server.close(r) : r()));
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

/** The script's rule, evaluated outside k6 (it is plain JavaScript between two markers). */
function scriptRule() {
  const src = fs.readFileSync(SCRIPT, "utf8");
  const m = src.match(/\/\/ worst-case:begin\n([\s\S]*?)\/\/ worst-case:end/);
  assert.ok(m, "k6/kvbench.js has the worst-case:begin/end markers");
  return new Function(`${m[1]}; return worstCaseTimeoutMs;`)();
}

test("the script's timeout rule is kvbench run's", () => {
  const rule = scriptRule();
  // The table of args.rs's default_timeout_covers_the_workers_worst_case, in ms.
  const cases = [
    ["http://w/test", (8 * (4 * 10 + 5) + 5) * 1000],
    ["http://w/test?stores=kv,upstash&timeout_ms=2000", (2 * (4 * 2 + 2) + 5) * 1000],
    ["http://w/test?stores=kv%2Cupstash", (2 * (4 * 10 + 5) + 5) * 1000],
    ["http://w/test?order=upstash,kv,denokv", (3 * (4 * 10 + 5) + 5) * 1000],
    ["http://w/test?order=random&stores=kv", (4 * 10 + 5 + 5) * 1000],
  ];
  for (const [url, ms] of cases) assert.equal(rule(url), ms, url);
});

function k6(env) {
  const out = path.join(work, `k6-${Math.random().toString(36).slice(2)}.json`);
  const args = ["run", "--quiet", "--no-usage-report", "--out", `json=${out}`];
  for (const [k, v] of Object.entries({ KVBENCH_RATE: "1", KVBENCH_DURATION: "1s", ...env })) args.push("-e", `${k}=${v}`);
  args.push(SCRIPT);
  return new Promise((resolve, reject) => {
    const child = spawn(K6_BIN, args, { stdio: ["ignore", "ignore", "pipe"] });
    let err = "";
    child.stderr.on("data", (d) => (err = (err + d).slice(-8000)));
    const timer = setTimeout(() => child.kill("SIGKILL"), 90_000);
    child.on("error", reject);
    child.on("exit", (code) => {
      clearTimeout(timer);
      assert.equal(code, 0, `k6 failed:\n${err}`);
      const points = fs.readFileSync(out, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l)).filter((p) => p.type === "Point");
      resolve(points);
    });
  });
}

/** The distinct outcomes of the run's requests (one or two: k6 may start one per second). */
const outcomes = (points) => [...new Set(points.filter((p) => p.metric === "kvbench_request_ms").map((p) => p.data.tags.outcome))];
const config = (points) => points.find((p) => p.metric === "kvbench_config").data.tags;

test("k6 times a request out at the worker's worst case, not at its own 60 s", { timeout: 120_000 }, async () => {
  // stores=kv, timeout_ms=250: the worker answers within 1 x (4 x 250 ms + 250 ms waiting for a
  // timed-out call) + 5 s = 6.25 s.
  const points = await k6({ KVBENCH_URL: `${base}?stores=kv&timeout_ms=250&hold_ms=7000` });
  assert.deepEqual(outcomes(points), ["timeout"]);
  for (const p of points.filter((p) => p.metric === "kvbench_request_ms")) {
    assert.ok(p.data.value >= 6150 && p.data.value < 7000, `timed out after ${p.data.value} ms`);
  }
  assert.equal(config(points).timeout, "6250ms");
  assert.equal(config(points).e2e, "duration");
});

test("KVBENCH_TIMEOUT overrides the rule; KVBENCH_E2E=total counts blocked, connecting and TLS", { timeout: 120_000 }, async () => {
  const held = await k6({ KVBENCH_URL: `${base}?hold_ms=3000`, KVBENCH_TIMEOUT: "1s" });
  assert.deepEqual(outcomes(held), ["timeout"]);
  assert.equal(config(held).timeout, "1s");

  const total = await k6({ KVBENCH_URL: base, KVBENCH_E2E: "total" });
  assert.deepEqual(outcomes(total), ["ok"]);
  assert.equal(config(total).e2e, "total");
  // Per request (the points of one iteration share its kvbench_req metadata).
  const requests = new Map();
  for (const p of total) {
    const id = p.data.metadata?.kvbench_req;
    if (!requests.has(id)) requests.set(id, {});
    requests.get(id)[p.metric] = p.data.value;
  }
  let connected = 0;
  for (const [id, m] of requests) {
    if (m.kvbench_request_ms === undefined) continue;
    const want = m.http_req_duration + m.http_req_blocked + m.http_req_connecting + m.http_req_tls_handshaking;
    assert.ok(Math.abs(m.kvbench_request_ms - want) < 0.01, `${id}: ${m.kvbench_request_ms} vs ${want}`);
    if (m.http_req_connecting > 0) connected++;
  }
  assert.ok(connected > 0, "a fresh connection was timed");
});
