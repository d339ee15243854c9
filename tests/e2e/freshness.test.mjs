// Fresh or fast against real replication with a known lag: `npm run bench`'s own path (the worker
// under Miniflare, a short load run, then the freshness rounds across two local members — the
// writer on the primaries, the reader in a read region behind a real Redis replica whose link is
// delayed by scripts/delay-proxy.mjs, and a PostgreSQL hot standby applying each commit
// `recovery_min_apply_delay` late), with a lag this test chooses. Checked in report.json's
// `freshness`: the replicated stores are seen at the reader no sooner than the lag and within a
// poll interval after it, the primed reader's reads before it counted stale; the stores the
// members share (kv, do, r2, d1 — Miniflare keeps one copy) within a poll interval; the writer
// reads its own writes at once; the Cache API never at the other member; every row printed.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { spawn } from "node:child_process";
import { ROOT } from "./procs.mjs";

const LAG_MS = 1500;
const INTERVAL_MS = 100;
const ROUNDS = 2;
// What the replication path adds to the lag itself on a busy machine (the proxy's timers, the
// replica applying the stream, the standby's WAL receiver): seen here at 5–60 ms.
const PATH_MS = 200;

function bench(env) {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", ["scripts/bench.sh"], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    const timer = setTimeout(() => child.kill("SIGTERM"), 600_000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      code === 0 ? resolve(out) : reject(new Error(`bench.sh exited ${code}:\n${out.slice(-4000)}`));
    });
  });
}

test(`freshness rounds through npm run bench recover a replication lag of ${LAG_MS} ms`, { timeout: 660_000 }, async () => {
  const out = await bench({
    KVBENCH_SKIP_SETUP: "1",
    BENCH_RATE: "5",
    BENCH_DURATION: "3s",
    BENCH_WARMUP: "0",
    BENCH_FRESH_ROUNDS: String(ROUNDS),
    BENCH_FRESH_LIMIT: "8s",
    KVBENCH_REPLICA_LAG_MS: String(LAG_MS),
  });
  const dir = out.match(/report written to (bench-results\/[^/\s]+)\//)?.[1];
  assert.ok(dir, out.slice(-2000));
  const report = JSON.parse(fs.readFileSync(path.join(ROOT, dir, "report.json"), "utf8"));
  try {
    const rounds = report.freshness;
    const of = (store, reader, c) => rounds.filter((r) => r.store === store && r.reader === reader && (!c || r.case === c));
    for (const store of ["kv", "upstash", "denokv", "do", "d1", "r2", "cache", "redis", "postgres", "hyperdrive"]) {
      for (const reader of ["local-1", "local-2"]) {
        for (const c of ["cold", "primed"]) assert.equal(of(store, reader, c).length, ROUNDS, `${store} ${reader} ${c}`);
      }
    }
    for (const r of rounds) {
      assert.equal(r.interval_ms, INTERVAL_MS);
      assert.equal(r.errors, 0, `${r.store} ${r.reader}: ${JSON.stringify(r)}`);
      assert.equal(r.went_back, 0, `${r.store} ${r.reader}: ${JSON.stringify(r)}`);
    }
    // Replicated: never before the lag, and seen within a poll interval after it (its bound).
    for (const store of ["upstash", "postgres", "hyperdrive"]) {
      for (const r of of(store, "local-2")) {
        assert.ok(r.visible_ms, `${store} never seen: ${JSON.stringify(r)}`);
        const [low, high] = r.visible_ms;
        assert.ok(high >= LAG_MS, `${store} seen before the lag: ${JSON.stringify(r)}`);
        assert.ok(low <= LAG_MS + INTERVAL_MS + PATH_MS, `${store} seen later than a poll after the lag: ${JSON.stringify(r)}`);
        assert.ok(r.stale >= 5, `${store}: the reads during the lag are stale: ${JSON.stringify(r)}`);
      }
    }
    // One copy, shared by both members, and the writer's own reads: within a poll interval.
    const shared = ["kv", "do", "r2", "d1", "redis", "denokv"];
    for (const [store, reader] of [...shared.map((s) => [s, "local-2"]), ...shared.concat(["upstash", "postgres", "cache"]).map((s) => [s, "local-1"])]) {
      for (const r of of(store, reader)) {
        assert.ok(r.visible_ms, `${store} at ${reader} never seen: ${JSON.stringify(r)}`);
        assert.ok(r.visible_ms[0] <= INTERVAL_MS, `${store} at ${reader}: ${JSON.stringify(r)}`);
      }
    }
    // The Cache API keeps its copies where they were written: never at the other member, and not
    // waited for until the limit (the round ends when the other stores are seen).
    for (const r of of("cache", "local-2")) {
      assert.equal(r.visible_ms, null, JSON.stringify(r));
      assert.equal(r.per_location, true);
      assert.ok(r.reads < 8000 / INTERVAL_MS / 2, JSON.stringify(r));
    }
    // The table under the answer, in the terminal and report.html.
    assert.match(out, /fresh or fast/);
    assert.match(out, /upstash\s+local-1 → local-2\s+primed/);
    assert.match(out, /cache\s+local-1 → local-2\s+\w+\s+\d+\s+\d+\s+only where written/);
    const html = fs.readFileSync(path.join(ROOT, dir, "report.html"), "utf8");
    assert.match(html, /<table id="freshness">/);
  } finally {
    fs.rmSync(path.join(ROOT, dir), { recursive: true, force: true });
  }
});
