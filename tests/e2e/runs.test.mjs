// A load run's archive at rate: `kvbench run` against the worker under Miniflare with the run
// header, then `kvbench import worker --run`: the answers kept are exactly the answers the worker
// sent (every request that got an answer, 200 or not), counted on the stream's end line, with no
// failed keep; the run spread over RUN_SHARDS shard objects, `seq` unique and rising through the
// stream, kept by two isolates (the worker in two workerd processes, as deployed many isolates
// keep into the same shards). Bounded and on loopback: 1,000 req/s for 10 s by default (KVBENCH_RUNS_RATE,
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

test(`a run at ${RATE} req/s keeps exactly the answers the worker sent`, { timeout: 600_000 }, async () => {
  const run = `rate-${RATE}-${Date.now()}`;
  const out = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-runs-"));
  const imported = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-runs-import-"));
  try {
    const q = "stores=kv&min_bytes=1024&max_bytes=1024&keys=1000";
    const t0 = Date.now();
    const sent = await kvbench(["run", ...urls.flatMap((u) => ["--url", `${u}/test?${q}`]), "--rate", String(RATE), "--duration", DURATION, "--header", `Kvbench-Run: ${run}`, "--out", out]);
    assert.equal(sent.code, 0, sent.out);
    const report = JSON.parse(fs.readFileSync(path.join(out, "report.json"), "utf8"));
    // What the worker sent: every request that got an HTTP answer (a 503 of a full isolate is
    // kept as a failure line too); the client's own failures (not sent, timeouts) never reached it.
    const clientSide = ["not_sent", "timeout", "connect", "transport", "cancelled"];
    const answeredByWorker = report.total.answered + Object.entries(report.total.failures)
      .filter(([k]) => !clientSide.includes(k))
      .reduce((n, [, v]) => n + v, 0);
    // A busy machine may not hold the rate (requests not sent are no answers of the worker's);
    // a quarter of it is still a run worth keeping.
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
    // Each isolate's first answer is cold: two isolates kept into this run.
    assert.equal(kept.lines.filter((l) => l.cold).length, 2, "a cold answer from each of the two isolates");
    const shards = new Set(seqs.map((s) => Math.floor(s / 2 ** 40)));
    assert.equal(shards.size, Math.min(Number(SHARDS), seqs.length), "every shard holds answers");

    const r = await kvbench(["import", "worker", url, "--run", run, "--out", imported]);
    assert.equal(r.code, 0, r.out);
    const back = JSON.parse(fs.readFileSync(path.join(imported, "report.json"), "utf8"));
    assert.equal(back.total.answered, report.total.answered, "the import has every answer");
    assert.equal(back.total.scheduled, answeredByWorker);
    assert.equal(back.total.stores.kv.reads, report.total.stores.kv.reads);
    assert.equal(back.total.stores.kv.writes, report.total.stores.kv.writes);
    assert.equal(back.runs[0].import.lines, answeredByWorker);
    assert.equal(back.runs[0].import.keep_failed, 0);
    console.log(`# ${RATE} req/s for ${DURATION}: achieved ${report.total.achieved_rate.toFixed(0)} req/s, ${report.total.answered} answered, ${answeredByWorker} sent by the worker, all kept ${keptS.toFixed(1)} s after the start, ${SHARDS} shards; failures ${JSON.stringify(report.total.failures)}`);
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
    fs.rmSync(imported, { recursive: true, force: true });
  }
});
