// A V8 CPU profile of the worker inside workerd while it serves /test (closed loop, like
// bench/cpu.mjs), through workerd's inspector: the top functions by self time. Build with
// function names for readable wasm frames: KVBENCH_WASM_NAMES=1 npm run build.
// Usage: node bench/profile.mjs [--seconds 8] [--query stores=kv,upstash] [--top 30]
//        [--callers TEXT]  (also: the call paths of the functions whose name contains TEXT)
//        [--floor]  (the floor worker, bench/floor-worker.js, with the same query, instead)
//        [--postgres]  (a private PostgreSQL, scripts/postgres.sh, as POSTGRES_URL; with
//        --floor, the postgres.js floor, bench/floor-postgres.js)
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { applyMigrations, newMiniflare, ROOT, workerOptions } from "../scripts/worker-options.mjs";
import { floorOptions, floorPostgresOptions } from "./floor.mjs";
import { inspect } from "./inspector.mjs";
import { freePort } from "../scripts/net.mjs";
import { startGateway, startRedis, stop } from "../tests/e2e/procs.mjs";

const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "8" },
    query: { type: "string", default: "stores=kv,upstash" },
    top: { type: "string", default: "30" },
    callers: { type: "string" },
    floor: { type: "boolean", default: false },
    postgres: { type: "boolean", default: false },
  },
});
const redis = await startRedis();
const TOKEN = `bench-profile-${process.pid}`;
const gateway = await startGateway(redis.port, TOKEN);
const inspectorPort = await freePort();
const vars = {
  UPSTASH_REDIS_REST_URL: gateway.url,
  UPSTASH_REDIS_REST_TOKEN: TOKEN,
  REDIS_URL: `redis://127.0.0.1:${redis.port}`,
  // Loopback only, no token: /test answers anyone (closed without BENCH_TOKEN otherwise).
  BENCH_OPEN: "true",
};
// A private PostgreSQL, stopped (by its data directory's PID file) in the finally below.
const pgDir = values.postgres ? fs.mkdtempSync(path.join(ROOT, ".stack-cpu-pg-")) : null;
if (pgDir) {
  vars.POSTGRES_URL = execFileSync("bash", [path.join(ROOT, "scripts/postgres.sh"), "start", pgDir, String(await freePort()), `profile-${process.pid}`], { encoding: "utf8" }).trim();
}
const floor = values.postgres ? floorPostgresOptions : floorOptions;
const mf = newMiniflare({
  ...(values.floor ? floor(vars) : workerOptions(vars)),
  host: "127.0.0.1",
  port: 0,
  inspectorPort,
  unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }],
  stripCfConnectingIp: false,
});
try {
  await mf.ready;
  await applyMigrations(mf);
  const base = (await mf.unsafeGetDirectURL()).toString().replace(/\/$/, "");
  const url = `${base}${values.floor ? "/" : "/test"}?${values.query}`;
  const { send, close } = await inspect(inspectorPort);
  const drive = async (seconds) => {
    const until = Date.now() + seconds * 1000;
    let n = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (Date.now() < until) {
          const r = await fetch(url);
          await r.arrayBuffer();
          n++;
        }
      }),
    );
    return n;
  };
  await drive(2);
  await send("Profiler.enable");
  await send("Profiler.setSamplingInterval", { interval: 100 });
  await send("Profiler.start");
  const n = await drive(Number(values.seconds));
  const { result } = await send("Profiler.stop");
  close();
  const { nodes, samples, timeDeltas } = result.profile;
  const byId = new Map(nodes.map((x) => [x.id, x]));
  const parent = new Map();
  for (const x of nodes) for (const c of x.children ?? []) parent.set(c, x.id);
  const nameOf = (node) => {
    const f = node.callFrame;
    return `${f.functionName || "(anonymous)"} ${f.url ? `[${f.url.split("/").pop()}]` : ""}`.trim();
  };
  const self = new Map();
  const paths = new Map();
  let total = 0;
  samples.forEach((sid, i) => {
    const node = byId.get(sid);
    const name = nameOf(node);
    const dt = timeDeltas[i] ?? 0;
    self.set(name, (self.get(name) ?? 0) + dt);
    total += dt;
    if (values.callers && name.includes(values.callers)) {
      const path = [];
      for (let id = parent.get(sid); id !== undefined && path.length < 4; id = parent.get(id)) {
        path.push(nameOf(byId.get(id)).replace(/::h[0-9a-f]{16}/, "").slice(0, 70));
      }
      const key = path.join(" < ");
      paths.set(key, (paths.get(key) ?? 0) + dt);
    }
  });
  const busy = total - (self.get("(idle)") ?? 0);
  console.log(`${n} requests profiled; ${(busy / n).toFixed(1)} us/req busy (not idle) in this isolate; self time by function (top ${values.top}):`);
  for (const [name, us] of [...self].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top))) {
    console.log(`${((100 * us) / total).toFixed(1).padStart(5)}%  ${(us / n).toFixed(1).padStart(7)} us/req  ${name.slice(0, 110)}`);
  }
  if (values.callers) {
    console.log(`\ncallers of *${values.callers}*:`);
    for (const [path, us] of [...paths].sort((a, b) => b[1] - a[1]).slice(0, 12)) {
      console.log(`${(us / n).toFixed(1).padStart(7)} us/req  < ${path}`);
    }
  }
} finally {
  await mf.dispose();
  await stop(gateway.proc);
  await stop(redis.proc);
  if (pgDir) {
    execFileSync("bash", [path.join(ROOT, "scripts/postgres.sh"), "stop", pgDir]);
    fs.rmSync(pgDir, { recursive: true, force: true });
  }
}
