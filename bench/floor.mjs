// The Miniflare options of the floor worker (bench/floor-worker.js), as bench/cpu.mjs and
// bench/profile.mjs run it: the bindings of every store it has a floor for, and `vars`.
import path from "node:path";
import { ROOT, compatibilityDate } from "../scripts/worker-options.mjs";

export function floorOptions(vars) {
  return {
    modules: true,
    scriptPath: path.join(ROOT, "bench/floor-worker.js"),
    compatibilityDate: compatibilityDate(),
    kvNamespaces: ["BENCH_KV"],
    d1Databases: ["BENCH_D1"],
    r2Buckets: ["BENCH_R2"],
    durableObjects: { FLOOR_DO: { className: "FloorObject", useSQLite: true } },
    bindings: vars,
  };
}

/** The Postgres floor (bench/floor-postgres.js: postgres.js over `connect()`), with `vars`. */
export function floorPostgresOptions(vars) {
  return {
    modules: true,
    scriptPath: path.join(ROOT, "bench/floor-postgres.js"),
    modulesRoot: ROOT,
    modulesRules: [{ type: "ESModule", include: ["**/*.js"] }],
    compatibilityDate: compatibilityDate(),
    compatibilityFlags: ["nodejs_compat"],
    // Unused: bench/cpu.mjs applies the D1 migrations to every worker it starts.
    d1Databases: ["BENCH_D1"],
    bindings: vars,
  };
}
