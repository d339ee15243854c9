// workerd CPU per request of the Rust worker beside a floor worker doing only the same I/O
// (bench/floor-worker.js), side by side in one run, store set by store set: the same
// redis-server and Upstash-REST gateway, each worker in its own Miniflare (alternating rounds, so
// drift hits both), driven closed-loop by CONCURRENCY keep-alive loops for SECONDS each. CPU is
// workerd's utime + stime from /proc, per request answered; the table prints each set's floor
// and ours, and ours as a ratio to its floor (the median of the rounds' ratios).
// Usage: node bench/cpu.mjs [--seconds 10] [--concurrency 8] [--rounds 3]
//        [--sets "kv,upstash;kv;upstash;redis;do;d1;r2;cache"]  (each set: the stores of one row;
//        a set may end in "@100" for 100-byte values instead of 4–64 KiB)
// Build first (npm run build); loopback only.
import fs from "node:fs";
import path from "node:path";
import { execFileSync } from "node:child_process";
import { parseArgs } from "node:util";
import { Miniflare } from "miniflare";
import { ROOT, workerOptions } from "../scripts/worker-options.mjs";
import { childPids, startGateway, startRedis, stop } from "../tests/e2e/procs.mjs";
import { applyMigrations } from "../scripts/worker-options.mjs";
import { floorOptions as floorOptions_ } from "./floor.mjs";

const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "10" },
    concurrency: { type: "string", default: "8" },
    rounds: { type: "string", default: "3" },
    sets: { type: "string", default: "kv,upstash;kv,upstash@100;kv;upstash;upstash@100;redis;do;d1;r2;cache" },
  },
});
const SECONDS = Number(values.seconds);
const CONCURRENCY = Number(values.concurrency);
const ROUNDS = Number(values.rounds);
for (const [name, v, max] of [["seconds", SECONDS, 600], ["concurrency", CONCURRENCY, 256], ["rounds", ROUNDS, 20]]) {
  if (!Number.isInteger(v) || v < 1 || v > max) {
    console.error(`--${name}: expected a whole number 1..${max}`);
    process.exit(2);
  }
}
const TICK = Number(execFileSync("getconf", ["CLK_TCK"]).toString()) || 100;

/** workerd's CPU ms (user + system): the Miniflare's workerd child of this process. */
function workerdCpuMs() {
  const pids = childPids("workerd");
  let ms = 0;
  for (const pid of pids) {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    ms += ((Number(fields[11]) + Number(fields[12])) * 1000) / TICK;
  }
  return ms;
}

async function drive(url, seconds) {
  let done = 0;
  let failed = 0;
  const until = Date.now() + seconds * 1000;
  const loop = async () => {
    while (Date.now() < until) {
      try {
        const res = await fetch(url);
        await res.arrayBuffer();
        if (res.ok) done++;
        else failed++;
      } catch {
        failed++;
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, loop));
  return { done, failed };
}

async function measure(options, path_) {
  // As scripts/serve-worker.mjs runs the worker: requests straight to it (no Miniflare entry
  // worker), outbound fetch not re-issued through Miniflare's header-stripping worker.
  const mf = new Miniflare({
    ...options,
    host: "127.0.0.1",
    port: 0,
    unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }],
    stripCfConnectingIp: false,
  });
  await mf.ready;
  await applyMigrations(mf);
  const base = (await mf.unsafeGetDirectURL()).toString().replace(/\/$/, "");
  try {
    await drive(`${base}${path_}`, 2); // warm-up: compile, first writes
    const cpu0 = workerdCpuMs();
    const t0 = Date.now();
    const { done, failed } = await drive(`${base}${path_}`, SECONDS);
    const wall = (Date.now() - t0) / 1000;
    const cpu = workerdCpuMs() - cpu0;
    return { rps: done / wall, cpuMs: cpu / Math.max(done, 1), done, failed };
  } finally {
    await mf.dispose();
  }
}

const redis = await startRedis();
const TOKEN = `bench-cpu-${process.pid}`;
const gateway = await startGateway(redis.port, TOKEN);
const vars = {
  UPSTASH_REDIS_REST_URL: gateway.url,
  UPSTASH_REDIS_REST_TOKEN: TOKEN,
  REDIS_URL: `redis://127.0.0.1:${redis.port}`,
};
const floorOptions = floorOptions_(vars);
const variants = [];
for (const set of values.sets.split(";").filter(Boolean)) {
  const [stores, bytes] = set.split("@");
  const size = bytes ? `&min_bytes=${bytes}&max_bytes=${bytes}` : "";
  const label = `${stores}${bytes ? ` (${bytes} B values)` : ""}`;
  variants.push({ name: `floor ${label}`, options: floorOptions, path: `/?stores=${stores}${size}`, floor: true });
  variants.push({ name: `kvbench ${label}`, options: workerOptions(vars), path: `/test?stores=${stores}${size}` });
}
variants.push({ name: "kvbench /healthz", options: workerOptions(vars), path: "/healthz" });
const results = variants.map(() => []);
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const [i, v] of variants.entries()) results[i].push(await measure(v.options, v.path));
  }
} finally {
  await stop(gateway.proc);
  await stop(redis.proc);
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(`\n${CONCURRENCY} concurrent closed-loop requests, ${SECONDS} s x ${ROUNDS} rounds (medians), workerd CPU per request:\n`);
console.log(`${"worker".padEnd(44)} ${"req/s".padStart(8)} ${"CPU ms/req".padStart(11)} ${"x floor CPU".padStart(17)} ${"x floor req/s".padStart(17)} ${"failed".padStart(7)}`);
// A ratio is the median of each round's ratio (ours over the floor measured just before it), so
// the machine's drift between rounds cancels out.
let floor = null;
for (const [i, v] of variants.entries()) {
  const rps = median(results[i].map((r) => r.rps));
  const cpu = median(results[i].map((r) => r.cpuMs));
  const failed = results[i].reduce((a, r) => a + r.failed, 0);
  if (v.floor) floor = results[i];
  const ratio = (field) => {
    if (v.floor || !floor) return "";
    const each = results[i].map((r, round) => r[field] / floor[round][field]);
    return `${median(each).toFixed(2)} (${Math.min(...each).toFixed(2)}-${Math.max(...each).toFixed(2)})`;
  };
  console.log(
    `${v.name.padEnd(44)} ${rps.toFixed(0).padStart(8)} ${cpu.toFixed(3).padStart(11)} ${ratio("cpuMs").padStart(17)} ${ratio("rps").padStart(17)} ${String(failed).padStart(7)}`,
  );
  if (!v.floor) floor = null;
}
