// Miniflare options for the built worker (build/index.js + its wasm), shared by the local bench
// server (scripts/serve-worker.mjs) and the end-to-end tests (tests/e2e/procs.mjs).
import path from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** Options for `new Miniflare(...)`: the bundle, a local `BENCH_KV` namespace, `bindings`. */
export function workerOptions(bindings, extra = {}) {
  return {
    modules: true,
    scriptPath: path.join(ROOT, "build/index.js"),
    modulesRoot: path.join(ROOT, "build"),
    modulesRules: [
      { type: "ESModule", include: ["**/*.js"] },
      { type: "CompiledWasm", include: ["**/*.wasm"] },
    ],
    // Must be on or before the bundled workerd's date (see wrangler.toml).
    compatibilityDate: "2026-04-01",
    kvNamespaces: ["BENCH_KV"],
    bindings,
    ...extra,
  };
}
