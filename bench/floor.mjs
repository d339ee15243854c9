// The Miniflare options of the floor worker (bench/floor-worker.js), as bench/cpu.mjs and
// bench/profile.mjs run it: the bindings of every store it has a floor for, and `vars`.
import path from "node:path";
import { ROOT } from "../scripts/worker-options.mjs";

export function floorOptions(vars) {
  return {
    modules: true,
    scriptPath: path.join(ROOT, "bench/floor-worker.js"),
    compatibilityDate: "2026-04-01",
    kvNamespaces: ["BENCH_KV"],
    d1Databases: ["BENCH_D1"],
    r2Buckets: ["BENCH_R2"],
    durableObjects: { FLOOR_DO: { className: "FloorObject", useSQLite: true } },
    bindings: vars,
  };
}
