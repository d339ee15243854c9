// Requests in flight per isolate, and what they cost in memory: the built worker under Miniflare
// (one isolate, as scripts/serve-worker.mjs runs it) with every store on real local parts
// (redis-server, the Upstash-REST gateway, denokv, Miniflare's KV, DO, D1, R2, Cache), sent
// WAVES bursts of N simultaneous /test requests. It prints, per burst, how many were answered
// and how many got the memory budget's 503, the most answered requests in flight at once (as
// the client saw them), and the isolate's memory — what the 128 MB limit counts: its wasm memory
// (GET / `isolate.wasm_memory_bytes`; it only grows) plus the most the V8 heap held live (used
// heap + ArrayBuffer backing stores right after a full GC, forced every ~100 ms through workerd's
// inspector while the burst runs). The committed heap's peak is printed too: locally V8 runs
// without the deployed isolate's heap limit, so it lets garbage pile up that a deployed isolate
// would collect. workerd's resident memory also holds Miniflare's emulated storage, which grows
// with every key written. Loopback only; every burst is bounded in count and time.
// Usage: node bench/memory.mjs [--requests 200] [--waves 3] [--query ""]   (npm run build first)
import fs from "node:fs";
import { parseArgs } from "node:util";
import { applyMigrations, newMiniflare, workerOptions } from "../scripts/worker-options.mjs";
import { freePort } from "../scripts/net.mjs";
import { inspect } from "./inspector.mjs";
import { childPids, startDenoKv, startGateway, startRedis, stop } from "../tests/e2e/procs.mjs";

const { values } = parseArgs({
  options: {
    requests: { type: "string", default: "200" },
    waves: { type: "string", default: "3" },
    query: { type: "string", default: "" },
  },
});
const REQUESTS = Number(values.requests);
const WAVES = Number(values.waves);
for (const [name, v, max] of [["requests", REQUESTS, 1000], ["waves", WAVES, 20]]) {
  if (!Number.isInteger(v) || v < 1 || v > max) {
    console.error(`--${name}: expected a whole number 1..${max}`);
    process.exit(2);
  }
}
const BURST_TIMEOUT_MS = 120_000;
const MIB = 1 << 20;

/** workerd's resident memory (MiB), summed over the processes Miniflare started. */
function workerdResident() {
  const pids = childPids("workerd");
  let kib = 0;
  for (const pid of pids) {
    const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
    kib += Number(status.match(/^VmHWM:\s+(\d+) kB/m)?.[1] ?? 0);
  }
  return kib / 1024;
}

/** The most of `spans` ([start, end]) open at one moment. */
function maxOverlap(spans) {
  const edges = spans.flatMap(([a, b]) => [[a, 1], [b, -1]]).sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  let open = 0;
  let most = 0;
  for (const [, d] of edges) most = Math.max(most, (open += d));
  return most;
}

/** `n` simultaneous requests to `url`, `sample()` run back to back while they are out. */
async function burst(url, n, sample) {
  const signal = AbortSignal.timeout(BURST_TIMEOUT_MS);
  const statuses = {};
  const answered = [];
  let storeErrors = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      await sample();
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  await Promise.all(
    Array.from({ length: n }, async () => {
      let status = "failed";
      const t0 = performance.now();
      try {
        const res = await fetch(url, { signal });
        const text = await res.text();
        status = res.status;
        if (res.ok) {
          answered.push([t0, performance.now()]);
          const answer = JSON.parse(text);
          storeErrors += Object.values(answer.stores).filter((s) => s.error).length;
        }
      } catch {
        // counted as "other"
      }
      statuses[status] = (statuses[status] ?? 0) + 1;
    }),
  );
  sampling = false;
  await sampler;
  return { statuses, maxInFlight: maxOverlap(answered), storeErrors };
}

const redis = await startRedis();
const TOKEN = `bench-memory-${process.pid}`;
const gateway = await startGateway(redis.port, TOKEN);
const denokv = await startDenoKv(TOKEN);
const vars = {
  UPSTASH_REDIS_REST_URL: gateway.url,
  UPSTASH_REDIS_REST_TOKEN: TOKEN,
  DENO_KV_URL: denokv.url,
  DENO_KV_ACCESS_TOKEN: TOKEN,
  REDIS_URL: `redis://127.0.0.1:${redis.port}`,
  // Loopback only, no token: /test answers anyone (closed without BENCH_TOKEN otherwise).
  BENCH_OPEN: "true",
};
const inspectorPort = await freePort();
const mf = newMiniflare(
  workerOptions(vars, {
    cf: false,
    inspectorPort,
    host: "127.0.0.1",
    port: 0,
    unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }],
    stripCfConnectingIp: false,
  }),
);
try {
  await mf.ready;
  await applyMigrations(mf);
  const base = (await mf.unsafeGetDirectURL()).toString().replace(/\/$/, "");
  const url = `${base}/test${values.query ? `?${values.query}` : ""}`;
  for (let i = 0; i < 20; i++) await (await fetch(url)).arrayBuffer(); // compile, first writes
  const isolate = async () => (await (await fetch(`${base}/`)).json()).isolate;
  const v8 = await inspect(inspectorPort);
  const usage = async () => (await v8.send("Runtime.getHeapUsage")).result;
  const held = (u) => (u.usedSize ?? 0) + (u.backingStorageSize ?? 0);
  // A full GC, then what is still reachable. workerd runs the GC when the isolate next has
  // work: during a burst at once, when idle on the next request.
  const live = async (pump) => {
    const gc = v8.send("HeapProfiler.collectGarbage");
    if (pump) await fetch(`${base}/healthz`).then((r) => r.text());
    await Promise.race([gc, new Promise((r) => setTimeout(r, 2000))]);
    return held(await usage());
  };
  let heapPeak = 0;
  let liveMax = 0;
  let samples = 0;
  const sample = async () => {
    const u = await usage();
    heapPeak = Math.max(heapPeak, (u.totalSize ?? 0) + (u.backingStorageSize ?? 0));
    // A forced GC on the 3rd sample (~60 ms in, every request in flight) and every 5th after:
    // each costs the isolate a full collection, so not every sample.
    if (++samples % 5 === 3) liveMax = Math.max(liveMax, await live(false));
  };
  const idleLive = await live(true);
  const idleWasm = (await isolate()).wasm_memory_bytes;
  console.log(`\n${url.replace(base, "")}: ${WAVES} bursts of ${REQUESTS} simultaneous requests, one isolate`);
  console.log(
    `idle after warm-up: wasm memory ${(idleWasm / MIB).toFixed(1)} MiB, V8 heap ${(idleLive / MIB).toFixed(1)} MiB live; workerd resident ${workerdResident().toFixed(0)} MiB\n`,
  );
  console.log(
    `${"burst".padEnd(6)} ${"200".padStart(5)} ${"503".padStart(5)} ${"other".padStart(6)} ${"in flight".padStart(10)} ${"store errors".padStart(13)} ${"wasm MiB".padStart(9)} ${"live heap".padStart(10)} ${"isolate MiB".padStart(12)} ${"KiB/request".padStart(12)} ${"heap peak".padStart(10)} ${"workerd RSS".padStart(12)}`,
  );
  for (let w = 1; w <= WAVES; w++) {
    heapPeak = 0;
    liveMax = 0;
    const { statuses, maxInFlight, storeErrors } = await burst(url, REQUESTS, sample);
    const wasm = (await isolate()).wasm_memory_bytes;
    const ok = statuses[200] ?? 0;
    const busy = statuses[503] ?? 0;
    const other = REQUESTS - ok - busy;
    // The isolate's need: its wasm memory and the most the heap held live with requests in flight.
    const total = wasm + liveMax;
    const growth = total - idleWasm - idleLive;
    console.log(
      `${String(w).padEnd(6)} ${String(ok).padStart(5)} ${String(busy).padStart(5)} ${String(other).padStart(6)} ${String(maxInFlight).padStart(10)} ${String(storeErrors).padStart(13)} ${(wasm / MIB).toFixed(1).padStart(9)} ${(liveMax / MIB).toFixed(1).padStart(10)} ${(total / MIB).toFixed(1).padStart(12)} ${(growth / 1024 / Math.max(maxInFlight, 1)).toFixed(0).padStart(12)} ${(heapPeak / MIB).toFixed(1).padStart(10)} ${workerdResident().toFixed(0).padStart(12)}`,
    );
  }
  v8.close();
} finally {
  await mf.dispose();
  await denokv.stop();
  fs.rmSync(denokv.dir, { recursive: true, force: true });
  await stop(gateway.proc);
  await stop(redis.proc);
}
