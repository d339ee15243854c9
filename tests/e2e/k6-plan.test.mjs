// k6/kvbench.js sized by Little's law and priced before it runs. The VU-hours of the published
// profiles come from the local k6 (1.1.0) itself — `k6 inspect --execution-requirements` of the
// real script — and must fit Grafana Cloud k6's free tier (500 VUh a month; an arrival-rate test
// is billed maxVUs x minutes / 60). scripts/k6-cloud.mjs must say the same, refuse a profile over
// the quota before any cloud call, and treat k6's exit 97 (a cloud run aborted) as a failure
// (checked with a stand-in for `k6 cloud`, which needs an account). And a request that finds no
// free VU is still counted: k6's dropped_iterations, imported as not_sent.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { ROOT, freePort } from "./procs.mjs";

const K6_BIN = process.env.K6_BIN ?? path.join(ROOT, ".tools/k6/bin/k6");
const KVBENCH_BIN = process.env.KVBENCH_BIN ?? path.join(ROOT, "target/debug/kvbench");
const SCRIPT = path.join(ROOT, "k6/kvbench.js");
const PLANNER = path.join(ROOT, "scripts/k6-cloud.mjs");
const FREE_TIER_VUH = 500;

let work;
before(() => {
  assert.ok(fs.existsSync(K6_BIN), `k6 not found at ${K6_BIN}: run npm run setup (or set K6_BIN)`);
  work = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-k6-plan-"));
});
after(() => work && fs.rmSync(work, { recursive: true, force: true }));

function inspect(env) {
  const args = ["inspect", "--execution-requirements"];
  for (const [k, v] of Object.entries({ KVBENCH_URL: "https://w.invalid/test", ...env })) args.push("-e", `${k}=${v}`);
  const r = spawnSync(K6_BIN, [...args, SCRIPT], { encoding: "utf8", timeout: 60_000 });
  assert.equal(r.status, 0, `k6 inspect failed:\n${r.stderr}`);
  return JSON.parse(r.stdout);
}

/** "30m0s" / "11m0s" / "1h0m0s" in minutes (the forms k6 1.1.0 prints for these profiles). */
function minutes(go) {
  const m = go.match(/^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/);
  assert.ok(m, `duration ${go}`);
  return Number(m[1] ?? 0) * 60 + Number(m[2] ?? 0) + Number(m[3] ?? 0) / 60;
}

function planner(args, env = {}) {
  return spawnSync(process.execPath, [PLANNER, ...args], {
    encoding: "utf8",
    timeout: 120_000,
    env: { ...process.env, K6_BIN, ...env },
  });
}

test("the published profiles fit the free tier, by k6's own execution requirements", () => {
  const vuh = {};
  for (const [profile, rate, mins] of [["regions", 200, 30], ["single", 400, 10]]) {
    const req = inspect({ KVBENCH_PROFILE: profile });
    const sc = req.scenarios.kvbench;
    assert.equal(sc.executor, "constant-arrival-rate");
    assert.equal(sc.rate, rate);
    assert.equal(minutes(sc.duration), mins);
    assert.equal(sc.maxVUs, req.maxVUs);
    assert.ok(sc.preAllocatedVUs >= 1 && sc.preAllocatedVUs <= req.maxVUs);
    // Billed on the scenario's minutes; at most on k6's total (gracefulStop included).
    vuh[profile] = { billed: (req.maxVUs * minutes(sc.duration)) / 60, atMost: (req.maxVUs * minutes(req.totalDuration)) / 60 };
    assert.ok(vuh[profile].atMost <= FREE_TIER_VUH, `${profile}: ${vuh[profile].atMost} VUh > ${FREE_TIER_VUH}`);
    // Little's law with the documented defaults: rate x 2 s (the p99.9 bound) x 1.25.
    assert.equal(req.maxVUs, Math.ceil(rate * 2 * 1.25), `${profile} maxVUs`);
  }

  const r = planner(["plan", "--json"]);
  assert.equal(r.status, 0, r.stderr);
  const rows = JSON.parse(r.stdout);
  assert.deepEqual(rows.map((x) => x.profile), ["regions", "single"]);
  for (const row of rows) {
    assert.ok(Math.abs(row.vuh - vuh[row.profile].billed) < 1e-9, `${row.profile}: plan ${row.vuh}`);
    assert.ok(Math.abs(row.vuh_at_most - vuh[row.profile].atMost) < 1e-9, `${row.profile}: plan ${row.vuh_at_most}`);
    assert.equal(row.fits, true);
  }
  const text = planner(["plan"]);
  assert.equal(text.status, 0, text.stderr);
  assert.match(text.stdout, /^regions\s+200\s+30\.0\s+\d+\s+500\s+250\.0\s+258\.3\s+yes$/m);
});

test("the knobs are the price: a longer answer-time bound reserves more and is refused over the quota", () => {
  const req = inspect({ KVBENCH_PROFILE: "regions", KVBENCH_ANSWER_MS: "4000", KVBENCH_VU_MARGIN: "1.5" });
  assert.equal(req.maxVUs, 200 * 4 * 1.5);
  const plan = planner(["plan", "regions", "--json", "-e", "KVBENCH_ANSWER_MS=4000", "-e", "KVBENCH_VU_MARGIN=1.5"]);
  assert.equal(plan.status, 1, "a profile over the quota fails the plan");
  assert.equal(JSON.parse(plan.stdout)[0].fits, false);
  const ok = planner(["plan", "regions", "--quota", "1000", "-e", "KVBENCH_ANSWER_MS=4000", "-e", "KVBENCH_VU_MARGIN=1.5"]);
  assert.equal(ok.status, 0, "the same fits a quota of 1000 (930 VUh at most)");
  const bad = spawnSync(K6_BIN, ["inspect", "-e", "KVBENCH_URL=https://w.invalid/test", "-e", "KVBENCH_ANSWER_MS=soon", SCRIPT], { encoding: "utf8", timeout: 60_000 });
  assert.notEqual(bad.status, 0);
  assert.match(bad.stderr, /KVBENCH_ANSWER_MS must be a number above 0/);
});

test("run: priced first, refused over the quota, and k6's exit 97 is a failed run", () => {
  // A stand-in for `k6 cloud` (which needs a Grafana account); `k6 inspect` stays the real one.
  const fake = path.join(work, "k6");
  const calls = path.join(work, "cloud-calls");
  fs.writeFileSync(fake, `#!/bin/sh\nif [ "$1" = cloud ]; then echo "$@" >> "${calls}"; exit "$FAKE_EXIT"; fi\nexec "${K6_BIN}" "$@"\n`, { mode: 0o755 });
  const secret = `k6-cloud-token-${process.pid}`;
  const env = { K6_BIN: fake, K6_CLOUD_TOKEN: secret, K6_CLOUD_STACK_ID: "12345" };
  const url = ["-e", "KVBENCH_URL=https://w.invalid/test"];

  const over = planner(["run", "regions", "--quota", "100", ...url], { ...env, FAKE_EXIT: "0" });
  assert.equal(over.status, 2, over.stderr);
  assert.match(over.stderr, /over the quota of 100: not started/);
  assert.equal(fs.existsSync(calls), false, "nothing sent to the cloud over the quota");

  const aborted = planner(["run", "regions", ...url], { ...env, FAKE_EXIT: "97" });
  assert.equal(aborted.status, 97);
  assert.match(aborted.stderr, /the cloud aborted the run .*not a result/);

  const fine = planner(["run", "single", ...url, "--", "--local-upload"], { ...env, FAKE_EXIT: "0" });
  assert.equal(fine.status, 0, fine.stderr);
  const sent = fs.readFileSync(calls, "utf8").trim().split("\n");
  assert.equal(sent.length, 2);
  assert.equal(sent[1], `cloud run -e KVBENCH_URL=https://w.invalid/test -e KVBENCH_PROFILE=single --local-upload ${SCRIPT}`);
  for (const r of [over, aborted, fine]) assert.ok(!(r.stdout + r.stderr).includes(secret), "the token is never printed");
});

test("a request that finds no free VU is counted: dropped_iterations, imported as not_sent", { timeout: 120_000 }, async () => {
  assert.ok(fs.existsSync(KVBENCH_BIN), `kvbench not found at ${KVBENCH_BIN}: cargo build -p kvbench`);
  // Answers after 400 ms; the script sized for 100 ms answers (margin 1) at 10 req/s has 1 VU.
  let served = 0;
  const server = http.createServer((req, res) => {
    served++;
    const timer = setTimeout(() => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ key: "1", colo: "LOCAL", order: ["kv"], stores: { kv: { read_ms: 1, hit: true, value_bytes: 1, write_ms: null, error: null } } }));
    }, 400);
    res.on("close", () => clearTimeout(timer));
  });
  const port = await freePort();
  await new Promise((r) => server.listen(port, "127.0.0.1", r));
  try {
    const out = path.join(work, "dropped.json");
    const args = ["run", "--quiet", "--no-usage-report", "--out", `json=${out}`];
    const env = { KVBENCH_URL: `http://127.0.0.1:${port}/test`, KVBENCH_RATE: "10", KVBENCH_DURATION: "2s", KVBENCH_ANSWER_MS: "100", KVBENCH_VU_MARGIN: "1", KVBENCH_RUN: "none" };
    for (const [k, v] of Object.entries(env)) args.push("-e", `${k}=${v}`);
    const code = await new Promise((resolve, reject) => {
      const child = spawn(K6_BIN, [...args, SCRIPT], { stdio: "ignore" });
      const timer = setTimeout(() => child.kill("SIGKILL"), 90_000);
      child.on("error", reject);
      child.on("exit", (c) => (clearTimeout(timer), resolve(c)));
    });
    assert.equal(code, 0);
    const points = fs.readFileSync(out, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l)).filter((p) => p.type === "Point");
    const dropped = points.filter((p) => p.metric === "dropped_iterations").reduce((s, p) => s + p.data.value, 0);
    assert.ok(dropped > 0, "one VU cannot keep 10 req/s of 400 ms answers");
    const imp = spawnSync(KVBENCH_BIN, ["import", "k6", out, "--out", path.join(work, "dropped"), "--label", "local"], { encoding: "utf8", timeout: 60_000 });
    assert.equal(imp.status, 0, imp.stderr);
    const t = JSON.parse(fs.readFileSync(path.join(work, "dropped", "report.json"), "utf8")).total;
    assert.equal(t.failures.not_sent, dropped, "every dropped iteration is a not_sent");
    assert.equal(t.sent, served, "every request the server saw was sent");
    assert.equal(t.scheduled, t.sent + dropped);
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
});
