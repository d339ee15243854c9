// workerd CPU per request of the Rust worker beside a floor worker doing only the same I/O
// (bench/floor-worker.js), side by side in one run, store set by store set: the same
// redis-server and Upstash-REST gateway, each worker in its own Miniflare (its own workerd, both
// running at once and taking turns: a slice of SECONDS each per round, so drift hits both),
// driven closed-loop by CONCURRENCY keep-alive loops. CPU is each workerd's utime + stime from
// /proc, per request answered; the table prints each set's floor and ours, and ours as a ratio
// to its floor (the median of the rounds' ratios, with their range).
// Usage: node bench/cpu.mjs [--seconds 3] [--concurrency 8] [--rounds 8]
//        [--sets "kv,upstash;kv;upstash;redis;do;d1;r2;cache"]  (each set: the stores of one row;
//        a set may end in "@100" for 100-byte values instead of 4–64 KiB)
//        [--against DIR]  (also another build of the worker, DIR/index.js and its wasm — a copy
//        of build/ from before a change — in every set, beside ours: "x against" is ours over
//        it, round by round)
// Build first (npm run build); loopback only.
import fs from "node:fs";
import path from "node:path";
import { execFileSync } from "node:child_process";
import { parseArgs } from "node:util";
import { newMiniflare, ROOT, workerOptions } from "../scripts/worker-options.mjs";
import { childPids, freePort, startGateway, startRedis, stop } from "../tests/e2e/procs.mjs";
import { applyMigrations } from "../scripts/worker-options.mjs";
import { floorOptions as floorOptions_, floorPostgresOptions } from "./floor.mjs";

const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "3" },
    concurrency: { type: "string", default: "8" },
    rounds: { type: "string", default: "8" },
    sets: { type: "string", default: "kv,upstash;kv,upstash@100;kv;upstash;upstash@100;redis;postgres;do;d1;r2;cache" },
    against: { type: "string" },
  },
});
const AGAINST = values.against ? path.resolve(values.against) : null;
if (AGAINST && !fs.existsSync(path.join(AGAINST, "index.js"))) {
  console.error(`--against: no index.js in ${AGAINST} (a copy of build/ from another commit)`);
  process.exit(2);
}
const SECONDS = Number(values.seconds);
const CONCURRENCY = Number(values.concurrency);
const ROUNDS = Number(values.rounds);
for (const [name, v, max] of [["seconds", SECONDS, 600], ["concurrency", CONCURRENCY, 256], ["rounds", ROUNDS, 20]]) {
  if (!Number.isInteger(v) || v < 1 || v > max) {
    console.error(`--${name}: expected a whole number 1..${max}`);
    process.exit(2);
  }
}
// The rounds end before the keys written by the warm-up expire (60 s TTL).
const WARM_S = 2;
if (WARM_S + ROUNDS * 2 * SECONDS > 55) {
  console.error(`--rounds x 2 x --seconds must stay within ${55 - WARM_S} s: the warm-up's keys expire at 60 s`);
  process.exit(2);
}
const TICK = Number(execFileSync("getconf", ["CLK_TCK"]).toString()) || 100;

/** CPU ms (user + system) of the processes `pids` (one Miniflare's workerd). */
function cpuMs(pids) {
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

/** One worker under its own Miniflare (its own workerd): `warm()` drives it WARM_S seconds,
 * `measure()` drives it SECONDS and counts its workerd's CPU, `dispose()` ends it. */
async function start(options, path_) {
  // As scripts/serve-worker.mjs runs the worker: requests straight to it (no Miniflare entry
  // worker), outbound fetch not re-issued through Miniflare's header-stripping worker.
  const before = new Set(childPids("workerd"));
  const mf = newMiniflare({
    ...options,
    host: "127.0.0.1",
    port: 0,
    unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }],
    stripCfConnectingIp: false,
  });
  await mf.ready;
  const pids = childPids("workerd").filter((pid) => !before.has(pid));
  await applyMigrations(mf);
  const url = `${(await mf.unsafeGetDirectURL()).toString().replace(/\/$/, "")}${path_}`;
  return {
    warm: () => drive(url, WARM_S), // compile, first writes
    async measure() {
      const cpu0 = cpuMs(pids);
      const t0 = Date.now();
      const { done, failed } = await drive(url, SECONDS);
      const wall = (Date.now() - t0) / 1000;
      const cpu = cpuMs(pids) - cpu0;
      return { rps: done / wall, cpuMs: cpu / Math.max(done, 1), done, failed };
    },
    dispose: () => mf.dispose(),
  };
}

const redis = await startRedis();
// A private PostgreSQL (scripts/postgres.sh), for the postgres set and its floor.
const pgDir = fs.mkdtempSync(path.join(ROOT, ".stack-cpu-pg-"));
const pgUrl = execFileSync("bash", [path.join(ROOT, "scripts/postgres.sh"), "start", pgDir, String(await freePort()), `cpu-${process.pid}`], { encoding: "utf8" }).trim();
const stopPostgres = () => {
  execFileSync("bash", [path.join(ROOT, "scripts/postgres.sh"), "stop", pgDir]);
  fs.rmSync(pgDir, { recursive: true, force: true });
};
const TOKEN = `bench-cpu-${process.pid}`;
const gateway = await startGateway(redis.port, TOKEN);
const vars = {
  UPSTASH_REDIS_REST_URL: gateway.url,
  UPSTASH_REDIS_REST_TOKEN: TOKEN,
  REDIS_URL: `redis://127.0.0.1:${redis.port}`,
  POSTGRES_URL: pgUrl,
  // Loopback only, no token: /test answers anyone (closed without BENCH_TOKEN otherwise).
  BENCH_OPEN: "true",
};
const floorOptions = floorOptions_(vars);

/** Empties redis (through the gateway), so no set starts with another's keys about to expire. */
async function flushRedis() {
  const res = await fetch(gateway.url, {
    method: "POST",
    headers: { Authorization: `Bearer ${TOKEN}` },
    body: JSON.stringify(["FLUSHALL"]),
  });
  const body = await res.text();
  if (!res.ok) throw new Error(`FLUSHALL through the gateway: HTTP ${res.status} ${body}`);
  execFileSync("psql", ["-X", "-q", pgUrl, "-c", "TRUNCATE kvbench_values"]);
}
// Each set's floor and ours run side by side, each in its own workerd, and take turns: round
// by round, one slice of SECONDS each (the first of the two alternating), so the machine's drift
// hits both alike.
const pairs = [];
for (const set of values.sets.split(";").filter(Boolean)) {
  const [stores, bytes] = set.split("@");
  const size = bytes ? `&min_bytes=${bytes}&max_bytes=${bytes}` : "";
  const label = `${stores}${bytes ? ` (${bytes} B values)` : ""}`;
  pairs.push([
    { name: `floor ${label}`, options: stores === "postgres" ? floorPostgresOptions(vars) : floorOptions, path: `/?stores=${stores}${size}`, floor: true },
    { name: `kvbench ${label}`, options: workerOptions(vars), path: `/test?stores=${stores}${size}`, ours: true },
    ...(AGAINST
      ? [{ name: `  against ${label}`, options: { ...workerOptions(vars), scriptPath: path.join(AGAINST, "index.js"), modulesRoot: AGAINST }, path: `/test?stores=${stores}${size}`, against: true }]
      : []),
  ]);
}
pairs.push([{ name: "kvbench /healthz", options: workerOptions(vars), path: "/healthz" }]);
// Each variant knows its set: a ratio is only ever to the floor (or our build) of its own set.
const variants = pairs.flatMap((pair, set) => pair.map((v) => ({ ...v, set })));
const results = variants.map(() => []);
try {
  let at = 0;
  for (const pair of pairs) {
    const running = [];
    try {
      // Redis empty and both warmed at once: each then sees the same hits and misses, and the
      // keys the warm-up wrote do not expire (60 s) before the last round.
      await flushRedis();
      for (const v of pair) running.push(await start(v.options, v.path));
      await Promise.all(running.map((r) => r.warm()));
      for (let round = 0; round < ROUNDS; round++) {
        const turn = round % 2 === 0 ? [...running.keys()] : [...running.keys()].reverse();
        for (const k of turn) results[at + k][round] = await running[k].measure();
      }
    } finally {
      for (const r of running) await r.dispose();
    }
    at += pair.length;
  }
} finally {
  await stop(gateway.proc);
  await stop(redis.proc);
  stopPostgres();
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(`\n${CONCURRENCY} concurrent closed-loop requests, ${SECONDS} s x ${ROUNDS} rounds (medians), workerd CPU per request:\n`);
console.log(`${"worker".padEnd(44)} ${"req/s".padStart(8)} ${"CPU ms/req".padStart(11)} ${"x floor CPU".padStart(17)} ${"x floor req/s".padStart(17)} ${"failed".padStart(7)}${AGAINST ? `  ours x against CPU` : ""}`);
// A ratio is the median of each round's ratio (ours over the floor measured just before it), so
// the machine's drift between rounds cancels out.
for (const [i, v] of variants.entries()) {
  const inSet = (key) => variants.findIndex((w) => w.set === v.set && w[key]);
  const floor = v.floor || inSet("floor") < 0 ? null : results[inSet("floor")];
  const ours = inSet("ours") < 0 ? null : results[inSet("ours")];
  const rps = median(results[i].map((r) => r.rps));
  const cpu = median(results[i].map((r) => r.cpuMs));
  const failed = results[i].reduce((a, r) => a + r.failed, 0);
  const ratio = (field) => {
    if (v.floor || !floor) return "";
    const each = results[i].map((r, round) => r[field] / floor[round][field]);
    return `${median(each).toFixed(2)} (${Math.min(...each).toFixed(2)}-${Math.max(...each).toFixed(2)})`;
  };
  // Ours over the other build, round by round (both measured in the same round).
  let vsAgainst = "";
  if (v.against && ours) {
    const each = ours.map((r, round) => r.cpuMs / results[i][round].cpuMs);
    vsAgainst = `  ${median(each).toFixed(2)} (${Math.min(...each).toFixed(2)}-${Math.max(...each).toFixed(2)})`;
  }
  console.log(
    `${v.name.padEnd(44)} ${rps.toFixed(0).padStart(8)} ${cpu.toFixed(3).padStart(11)} ${ratio("cpuMs").padStart(17)} ${ratio("rps").padStart(17)} ${String(failed).padStart(7)}${vsAgainst}`,
  );
}
