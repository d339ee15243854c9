// A kept run at rate: `kvbench run` with the run header against the stack under Miniflare, then
// the run's stream read back: answers the worker sent, answers kept, failed keeps, and the CPU of
// each workerd per answer (utime + stime from /proc): the stack's, where the run archive's objects
// run too, or with --split the archive's own beside it (tests/e2e/procs.mjs `splitArchive`);
// --workers N runs the benchmark worker in N workerd processes (N stacks, one archive), and
// kvbench sends each the same share of the schedule (its --url once per stack).
// --profile adds a V8 profile of the worker's isolate over the run (and with --split, of the
// archive's): self time per function and per answer. Build first (npm run build); loopback only.
// Usage: node bench/runs.mjs [--rate 2000] [--duration 20s] [--shards 8] [--split] [--workers 2]
//        [--no-run] (the same load without the run header: /test alone)
//        [--profile] [--top 25] [--query "stores=kv&min_bytes=1024&max_bytes=1024&keys=1000"]
//        [--keep-path] (the keep path alone: answers of a store the stack does not configure,
//        `stores=postgres` without POSTGRES_URL, each `not_configured` and touching nothing, so
//        the rate is the archive's, not what Miniflare's KV emulation lets the machine serve)
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { execFileSync, spawn } from "node:child_process";
import { parseArgs } from "node:util";
import { ROOT, childPids, sleep, startStack } from "../tests/e2e/procs.mjs";
import { freePort } from "../scripts/net.mjs";
import { inspect } from "./inspector.mjs";

const { values } = parseArgs({
  options: {
    rate: { type: "string", default: "2000" },
    duration: { type: "string", default: "20s" },
    shards: { type: "string", default: "8" },
    "no-run": { type: "boolean", default: false },
    split: { type: "boolean", default: false },
    workers: { type: "string", default: "1" },
    profile: { type: "boolean", default: false },
    top: { type: "string", default: "25" },
    query: { type: "string", default: "stores=kv&min_bytes=1024&max_bytes=1024&keys=1000" },
    "keep-path": { type: "boolean", default: false },
  },
});
const RATE = Number(values.rate);
if (!Number.isInteger(RATE) || RATE < 1 || RATE > 20_000) {
  console.error("--rate: a whole number 1..20000");
  process.exit(2);
}
const WORKERS = Number(values.workers);
if (!Number.isInteger(WORKERS) || WORKERS < 1 || WORKERS > 8) {
  console.error("--workers: a whole number 1..8");
  process.exit(2);
}
if (values.profile && WORKERS > 1) {
  console.error("--profile: with --workers 1 only (one inspector port)");
  process.exit(2);
}
const KVBENCH_BIN = process.env.KVBENCH_BIN ?? path.join(ROOT, "target/debug/kvbench");
const TICK = Number(execFileSync("getconf", ["CLK_TCK"]).toString()) || 100;

function cpuMs(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(f[11]) + Number(f[12])) * 1000) / TICK;
}

function kvbench(args) {
  return new Promise((resolve) => {
    const p = spawn(KVBENCH_BIN, args, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    p.stdout.on("data", (d) => (out += d));
    p.stderr.on("data", (d) => (out += d));
    p.on("close", (code) => resolve({ code, out }));
  });
}

const before = new Set(childPids("workerd"));
const inspectorPort = values.profile ? await freePort() : undefined;
const archiveInspectorPort = values.profile && values.split ? await freePort() : undefined;
const stack = await startStack(
  { STORES: "kv", RUN_SHARDS: values.shards, BENCH_OPEN: "true", PROBE_COLO_URL: "none" },
  { host: "127.0.0.1", port: 0, ...(inspectorPort ? { inspectorPort } : {}) },
  { splitArchive: values.split, workers: WORKERS, archiveInspectorPort },
);
const urls = await stack.urls();
const url = urls[0];
const targets = (q) => urls.flatMap((u) => ["--url", `${u}/test?${q}`]);
const pids = { worker: childPids("workerd").filter((p) => !before.has(p) && p !== stack.archivePid) };
if (stack.archivePid) pids.archive = [stack.archivePid];
const out = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-bench-runs-"));
try {
  const run = `bench-${RATE}-${Date.now()}`;
  const q = values["keep-path"] ? "stores=postgres&keys=1000" : values.query;
  // Warm-up: the isolates, the keys, the shards' tables.
  await kvbench(["run", ...targets(q), "--rate", "200", "--duration", "2s", "--header", `Kvbench-Run: warm-${run}`, "--out", out]);
  let profilers = [];
  if (values.profile) {
    profilers = [await inspect(inspectorPort)];
    if (archiveInspectorPort) profilers.push(await inspect(archiveInspectorPort));
    for (const p of profilers) {
      await p.send("Profiler.enable");
      await p.send("Profiler.setSamplingInterval", { interval: 200 });
      await p.send("Profiler.start");
    }
  }
  const cpu0 = Object.fromEntries(Object.entries(pids).map(([k, ps]) => [k, ps.reduce((n, p) => n + cpuMs(p), 0)]));
  const header = values["no-run"] ? [] : ["--header", `Kvbench-Run: ${run}`];
  const sent = await kvbench(["run", ...targets(q), "--rate", String(RATE), "--duration", values.duration, ...header, "--out", out]);
  if (sent.code !== 0) throw new Error(sent.out);
  const report = JSON.parse(fs.readFileSync(path.join(out, "report.json"), "utf8"));
  const clientSide = ["not_sent", "timeout", "connect", "transport", "cancelled"];
  const byWorker = report.total.answered + Object.entries(report.total.failures)
    .filter(([k]) => !clientSide.includes(k))
    .reduce((n, [, v]) => n + v, 0);
  let end = null;
  if (!values["no-run"]) {
    // The keeps run after the answers (waitUntil): bounded wait for the count to reach them.
    for (let i = 0; i < 240; i++) {
      const res = await fetch(`${url}/runs/${run}/answers`);
      if (res.status === 200) {
        const lines = (await res.text()).split("\n").filter(Boolean);
        end = JSON.parse(lines.at(-1));
        if (end.lines + end.keep_failed >= byWorker) break;
      }
      await sleep(250);
    }
  }
  const cpu = Object.fromEntries(Object.entries(pids).map(([k, ps]) => [k, ps.reduce((n, p) => n + cpuMs(p), 0) - cpu0[k]]));
  const reads = values["no-run"] ? 0 : 1;
  console.log(`rate ${RATE}/s for ${values.duration}${WORKERS > 1 ? `, the worker in ${WORKERS} workerd processes` : ""}${values.split || WORKERS > 1 ? ", archive in its own workerd" : ""}${values["no-run"] ? ", no run header" : `, ${values.shards} shards`}${values["keep-path"] ? ", the keep path alone (stores=postgres, not configured)" : ""}:`);
  console.log(`  achieved ${report.total.achieved_rate.toFixed(0)} req/s, answered ${report.total.answered}, sent by the worker ${byWorker}, failures ${JSON.stringify(report.total.failures)}`);
  if (end) console.log(`  kept ${end.lines}, keep_failed ${end.keep_failed}: ${end.lines === byWorker && end.keep_failed === 0 ? "kept = sent, exactly" : "NOT EXACT"}`);
  for (const [k, ms] of Object.entries(cpu)) {
    console.log(`  workerd (${k}) CPU ${(ms / 1000).toFixed(1)} s, ${(ms / byWorker).toFixed(3)} ms per answer (incl. ${reads} stream read)`);
  }
  for (const [i, p] of profilers.entries()) {
    const { result } = await p.send("Profiler.stop");
    p.close();
    printProfile(i === 0 ? "worker" : "run archive", result.profile, byWorker);
  }
} finally {
  fs.rmSync(out, { recursive: true, force: true });
  await stack.dispose();
}

function printProfile(what, { nodes, samples, timeDeltas }, n) {
  const byId = new Map(nodes.map((x) => [x.id, x]));
  const self = new Map();
  let total = 0;
  samples.forEach((sid, i) => {
    const f = byId.get(sid).callFrame;
    const name = `${f.functionName || "(anonymous)"} ${f.url ? `[${f.url.split("/").pop()}]` : ""}`.trim();
    const dt = timeDeltas[i] ?? 0;
    self.set(name, (self.get(name) ?? 0) + dt);
    total += dt;
  });
  const busy = total - (self.get("(idle)") ?? 0);
  console.log(`\n${what} isolate: ${(busy / n).toFixed(1)} us busy per answer; self time (top ${values.top}):`);
  for (const [name, us] of [...self].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top))) {
    console.log(`${((100 * us) / total).toFixed(1).padStart(5)}%  ${(us / n).toFixed(1).padStart(7)} us  ${name.replace(/::h[0-9a-f]{16}/, "").slice(0, 110)}`);
  }
}
