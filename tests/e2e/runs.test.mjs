// A load run's archive at rate: `kvbench run` against the worker under Miniflare with the run
// header, then `kvbench import worker --run`: the answers kept are exactly the answers the worker
// sent (every request that got an answer, 200 or not), counted on the stream's end line, with no
// failed keep; the run spread over RUN_SHARDS shard objects, `seq` unique and rising through the
// stream, kept by two isolates (the worker in two workerd processes, as deployed many isolates
// keep into the same shards); then the keep path alone, offered 2,000 answers a second
// (KVBENCH_RUNS_KEEP_RATE). Bounded and on loopback: 1,000 req/s offered for 10 s by default (KVBENCH_RUNS_RATE,
// KVBENCH_RUNS_DURATION and KVBENCH_RUNS_SHARDS measure other figures, docs/probes.md: "Kept runs"), the
// run archive's objects in a workerd of their own (procs.mjs `splitArchive`): in the stack's
// workerd each shard's SQLite commit waits for the disk on the thread every request needs.
// Run `npm run build` first (scripts/test.sh does).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { spawn } from "node:child_process";
import { ROOT, sleep, startStack } from "./procs.mjs";

const KVBENCH_BIN = process.env.KVBENCH_BIN ?? path.join(ROOT, "target/debug/kvbench");
const RATE = Number(process.env.KVBENCH_RUNS_RATE ?? 1000);
const DURATION = process.env.KVBENCH_RUNS_DURATION ?? "10s";
const SHARDS = process.env.KVBENCH_RUNS_SHARDS ?? "8";
const KEEP_RATE = Number(process.env.KVBENCH_RUNS_KEEP_RATE ?? 2000);

let mf;
let url;
/** Both stacks' URLs: the benchmark worker in two workerd processes (two isolates keeping into
 * the same shards, each from its own random start), kvbench sending each half the schedule. */
let urls;
before(async () => {
  mf = await startStack(
    { STORES: "kv", RUN_SHARDS: SHARDS, BENCH_OPEN: "true", PROBE_COLO_URL: "none" },
    { host: "127.0.0.1", port: 0 },
    { splitArchive: true, workers: 2 },
  );
  urls = await mf.urls();
  url = urls[0];
});
after(async () => {
  await mf?.dispose();
});

/** `kvbench ...args` without blocking this process (Miniflare serves from it): code, output. */
function kvbench(args) {
  return new Promise((resolve) => {
    const p = spawn(KVBENCH_BIN, args, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    p.stdout.on("data", (d) => (out += d));
    p.stderr.on("data", (d) => (out += d));
    p.on("close", (code) => resolve({ code, out }));
  });
}

async function runStatus(run) {
  const res = await fetch(`${url}/runs/${run}/answers`);
  if (res.status !== 200) return { status: res.status };
  const lines = (await res.text()).split("\n").filter(Boolean).map((l) => JSON.parse(l));
  return { status: 200, end: lines.pop(), lines };
}

/** `kvbench run` at `rate` for `duration` with the run header over both stacks, then the run's
 * stream: kept = sent by the worker exactly, no failed keep, `seq` unique and rising, every
 * shard used; then `kvbench import worker --run` has every answer. Returns what was measured. */
async function keptRun(name, rate, duration, q, check = () => {}) {
  const run = `${name}-${rate}-${Date.now()}`;
  const out = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-runs-"));
  const imported = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-runs-import-"));
  try {
    const t0 = Date.now();
    const sent = await kvbench(["run", ...urls.flatMap((u) => ["--url", `${u}/test?${q}`]), "--rate", String(rate), "--duration", duration, "--header", `Kvbench-Run: ${run}`, "--out", out]);
    assert.equal(sent.code, 0, sent.out);
    const report = JSON.parse(fs.readFileSync(path.join(out, "report.json"), "utf8"));
    // What the worker sent: every request that got an HTTP answer (a 503 of a full isolate is
    // kept as a failure line too); the client's own failures (not sent, timeouts) never reached it.
    const clientSide = ["not_sent", "timeout", "connect", "transport", "cancelled"];
    const answeredByWorker = report.total.answered + Object.entries(report.total.failures)
      .filter(([k]) => !clientSide.includes(k))
      .reduce((n, [, v]) => n + v, 0);
    // The claim is about keeping, not throughput: the rate is offered (open loop), and a busy
    // 2-core machine may not achieve it (requests not sent are no answers of the worker's). The
    // achieved rate is printed below; a quarter of the offered answers is still a run worth
    // checking every keep of.
    assert.ok(report.total.answered >= report.total.scheduled / 4, `answered ${report.total.answered}: ${JSON.stringify(report.total.failures)}`);
    // The keeps run after the responses (waitUntil): wait until the count stops moving.
    let kept;
    for (let i = 0; i < 240; i++) {
      kept = await runStatus(run);
      if (kept.status === 200 && kept.end.lines >= answeredByWorker) break;
      await sleep(250);
    }
    const keptS = (Date.now() - t0) / 1000;
    assert.equal(kept.status, 200);
    assert.deepEqual(kept.end, { end: true, lines: answeredByWorker, keep_failed: 0 }, "kept = answered by the worker, exactly");
    const seqs = kept.lines.map((l) => l.seq);
    assert.equal(new Set(seqs).size, seqs.length, "seq unique");
    assert.deepEqual([...seqs].sort((a, b) => a - b), seqs, "seq rises through the stream");
    const shards = new Set(seqs.map((s) => Math.floor(s / 2 ** 40)));
    assert.equal(shards.size, Math.min(Number(SHARDS), seqs.length), "every shard holds answers");
    check(kept.lines);

    const r = await kvbench(["import", "worker", url, "--run", run, "--out", imported]);
    assert.equal(r.code, 0, r.out);
    const back = JSON.parse(fs.readFileSync(path.join(imported, "report.json"), "utf8"));
    assert.equal(back.total.answered, report.total.answered, "the import has every answer");
    assert.equal(back.total.scheduled, answeredByWorker);
    for (const [store, s] of Object.entries(report.total.stores)) {
      assert.equal(back.total.stores[store]?.reads, s.reads, store);
      assert.equal(back.total.stores[store]?.writes, s.writes, store);
    }
    assert.equal(back.runs[0].import.lines, answeredByWorker);
    assert.equal(back.runs[0].import.keep_failed, 0);
    console.log(`# ${name}: ${rate} req/s for ${duration}: achieved ${report.total.achieved_rate.toFixed(0)} req/s, ${report.total.answered} answered, ${answeredByWorker} sent by the worker = kept, all kept ${keptS.toFixed(1)} s after the start, ${SHARDS} shards; failures ${JSON.stringify(report.total.failures)}`);
    return report;
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
    fs.rmSync(imported, { recursive: true, force: true });
  }
}

test(`a run offered ${RATE} req/s keeps exactly the answers the worker sent, at whatever rate the machine achieved`, { timeout: 600_000 }, async () => {
  const report = await keptRun("kv", RATE, DURATION, "stores=kv&min_bytes=1024&max_bytes=1024&keys=1000", (lines) => {
    // Each isolate's first answer is cold (this is the stacks' first load): two isolates kept
    // into this run.
    assert.equal(lines.filter((l) => l.cold).length, 2, "a cold answer from each of the two isolates");
  });
  assert.ok(report.total.stores.kv.reads > 0);
});

// The keep path alone, offered 2,000 answers a second: answers of a store this stack does not
// configure (no POSTGRES_URL: each answer says `not_configured` and touches nothing), so the
// rate is the archive's, not what Miniflare's KV emulation lets one machine serve.
test(`the keep path offered ${KEEP_RATE} answers a second keeps every one the worker sent`, { timeout: 600_000 }, async () => {
  const one = await (await fetch(`${url}/test?stores=postgres&keys=1000`)).json();
  assert.equal(one.stores.postgres.error?.kind, "not_configured", JSON.stringify(one));
  await keptRun("keep-path", KEEP_RATE, DURATION, "stores=postgres&keys=1000", (lines) => {
    assert.ok(lines.every((l) => l.answer?.stores?.postgres?.error?.kind === "not_configured" || l.failure), "every answer is the unconfigured store's");
  });
});
