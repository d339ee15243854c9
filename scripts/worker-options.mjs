// Miniflare options for the built worker (build/index.js + its wasm), shared by the local bench
// server (scripts/serve-worker.mjs) and the end-to-end tests (tests/e2e/procs.mjs): the bindings
// of wrangler.toml, emulated locally — KV, the SQLite Durable Object classes, D1 (with the
// migrations of migrations/, applied by applyMigrations) and R2; the Cache API is Miniflare's own.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Miniflare, convertV4MiniflareOptions } from "miniflare";
import { provenance } from "./provenance.mjs";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** Binding names, as in wrangler.toml (and crates/spec/src/store.rs `env`). */
export const BINDINGS = {
  kv: "BENCH_KV",
  durableObject: "BENCH_DO",
  durableObjectClass: "BenchObject",
  probes: "BENCH_PROBES",
  probesClass: "ProbeObject",
  runs: "BENCH_RUNS",
  runsClass: "RunArchive",
  directory: "BENCH_DIRECTORY",
  directoryClass: "FleetDirectory",
  d1: "BENCH_D1",
  r2: "BENCH_R2",
};

/** The report worker (crates/report-worker): GET /report's renderer, bound to the benchmark
 * worker as the service `REPORT` (wrangler.toml's [[services]]). */
export const REPORT_WORKER = "kvbench-report";
export const REPORT_BINDING = "REPORT";

// Miniflare options that belong to the whole instance, not to one of its workers.
const SHARED = new Set([
  "rootPath", "host", "port", "https", "httpsKey", "httpsKeyPath", "httpsCert", "httpsCertPath",
  "inspectorPort", "inspectorHost", "verbose", "log", "handleStructuredLogs", "handleUncaughtError",
  "upstream", "cf", "unsafeProxySharedSecret", "unsafeModuleFallbackService",
  "unsafeTriggerHandlers", "logRequests", "resourcePersistencePath", "unsafeDevRegistryPath",
]);

// Miniflare 4 options that Miniflare 5 no longer has. Its converter (below) drops unknown options
// without a word: a test that persisted objects or read workerd's output through one of these
// would quietly stop doing so. Each is refused here, with what replaces it.
const GONE = {
  durableObjectsPersist: "resourcePersistencePath (one directory for every resource)",
  kvPersist: "resourcePersistencePath",
  d1Persist: "resourcePersistencePath",
  r2Persist: "resourcePersistencePath",
  cachePersist: "resourcePersistencePath",
  defaultPersistRoot: "resourcePersistencePath",
  handleRuntimeStdio: "handleStructuredLogs(log) ({ timestamp, level, message })",
  liveReload: "nothing (Miniflare 5 has no live reload)",
  unsafeStickyBlobs: "nothing (Miniflare 5 has no sticky blobs)",
};

/** Miniflare 5's options from ours, which are written in Miniflare 4's shape (one worker's
 * bindings as top-level fields, or `workers: [...]` of them) and mapped by Miniflare's own
 * `convertV4MiniflareOptions`. That converter refuses `modulesRules` (Miniflare 5 discovers no
 * modules: its manifest lists each one), so a worker given as `scriptPath` + `modulesRoot` +
 * `modulesRules` is first turned into the explicit `modules` list of what its folder holds.
 * Throws on an option Miniflare 5 dropped (`GONE`). */
export function miniflareOptions(options) {
  const check = (o, where) => {
    for (const key of Object.keys(o)) {
      if (key in GONE) throw new Error(`Miniflare option ${key} (${where}) is gone in Miniflare 5: use ${GONE[key]}`);
    }
  };
  check(options, "shared");
  for (const [i, w] of (options.workers ?? []).entries()) check(w, `workers[${i}]`);
  const converted = options.workers
    ? { ...options, workers: options.workers.map(listModules) }
    : listModules({ name: MAIN_WORKER, ...options });
  return convertV4MiniflareOptions(converted);
}

/** `worker` with `modulesRules` replaced by `modules`: every file under `modulesRoot` that a rule
 * matches (each include a glob of one extension anywhere below the root, as ours are written),
 * the entry (`scriptPath`) first. */
function listModules(worker) {
  const { modulesRules, ...rest } = worker;
  if (!modulesRules) return worker;
  // Modules listed already (a test's own entry beside the build): the rules have nothing to add.
  if (Array.isArray(rest.modules)) {
    delete rest.scriptPath;
    return rest;
  }
  if (!rest.scriptPath || !rest.modulesRoot) throw new Error("modulesRules needs scriptPath and modulesRoot");
  const typeOf = (file) => {
    for (const rule of modulesRules) {
      for (const glob of rule.include) {
        const ext = /^\*\*\/\*(\.[A-Za-z0-9]+)$/.exec(glob);
        if (!ext) throw new Error(`module rule ${glob}: only **/*.ext is supported`);
        if (file.endsWith(ext[1])) return rule.type;
      }
    }
    return null;
  };
  const entry = path.resolve(rest.scriptPath);
  const files = fs.readdirSync(rest.modulesRoot, { recursive: true }).map((f) => path.join(rest.modulesRoot, String(f)));
  const modules = [entry, ...files.filter((f) => f !== entry).sort()]
    .map((file) => ({ file, type: typeOf(file) }))
    .filter((m) => m.type && fs.statSync(m.file).isFile())
    .map((m) => ({ type: m.type, path: m.file }));
  delete rest.scriptPath;
  return { ...rest, modules };
}

/** `new Miniflare(...)` over {@link miniflareOptions}: every local runtime the scripts, tests and
 * benches start goes through here. */
export function newMiniflare(options) {
  return new Miniflare(miniflareOptions(options));
}

/** The run archive's worker when it runs in a workerd of its own (`archiveOptions`). */
export const ARCHIVE_WORKER = "kvbench-archive";

/** The same bundle as a worker of its own that serves only the run archive's objects
 * (`RunArchive`), for a Miniflare (its own workerd process) beside the stack's: the stack binds
 * BENCH_RUNS to it across processes through Miniflare's dev registry at `registry`
 * (`splitArchive` of `stackOptions`). Deployed, the class is in the worker's own script, and its
 * objects run in isolates of their own, never on the thread of the worker that calls them;
 * locally one workerd runs every isolate on one thread, where each SQLite commit of a shard
 * waits for the disk (fsync) and holds up every request. */
export function archiveOptions(bindings, registry, { inspectorPort } = {}) {
  const main = workerOptions(bindings);
  return {
    cf: false,
    ...(inspectorPort ? { inspectorPort } : {}),
    unsafeDevRegistryPath: registry,
    workers: [{
      ...main,
      name: ARCHIVE_WORKER,
      kvNamespaces: [],
      d1Databases: [],
      r2Buckets: [],
      durableObjects: { [BINDINGS.runs]: { className: BINDINGS.runsClass, useSQLite: true } },
    }],
  };
}

/** Both workers in one Miniflare: the benchmark worker first (`dispatchFetch` and `getWorker()`
 * reach it), with `REPORT` bound to the report worker. `extra` may mix shared options (host,
 * port, cf, resourcePersistencePath) and the benchmark worker's own. `archiveRegistry`: BENCH_RUNS is the run
 * archive of another Miniflare (`archiveOptions`) registered there. */
export function stackOptions(bindings, extra = {}, { archiveRegistry, member = false, others = [] } = {}) {
  const shared = {};
  const own = {};
  for (const [k, v] of Object.entries(extra)) {
    if (SHARED.has(k)) shared[k] = v;
    else own[k] = v;
  }
  if (member) return { ...shared, workers: memberWorkers(bindings, own, others) };
  const main = workerOptions(bindings, own);
  if (archiveRegistry) {
    // BENCH_RUNS reaches the archive's own workerd (`archiveOptions`).
    shared.unsafeDevRegistryPath = archiveRegistry;
    main.durableObjects = {
      ...main.durableObjects,
      [BINDINGS.runs]: { className: BINDINGS.runsClass, scriptName: ARCHIVE_WORKER, useSQLite: true },
    };
  }
  return {
    ...shared,
    workers: [
      { name: "kvbench", ...main, serviceBindings: { ...(main.serviceBindings ?? {}), [REPORT_BINDING]: REPORT_WORKER } },
      {
        name: REPORT_WORKER,
        modules: true,
        scriptPath: path.join(ROOT, "crates/report-worker/build/index.js"),
        modulesRoot: path.join(ROOT, "crates/report-worker/build"),
        modulesRules: main.modulesRules,
        compatibilityDate: main.compatibilityDate,
      },
    ],
  };
}

/** The main worker's name, as a member's Durable Object bindings name it (`script_name`). */
export const MAIN_WORKER = "kvbench";

/** A fleet member as deployed (scripts/fleet.mjs): the member build (build-member/, `scripts/build.sh
 * member`: /, /healthz and /test only, no classes of its own) first, so `dispatchFetch` reaches
 * it, with BENCH_DO and BENCH_RUNS bound by script name to the main build beside it, which serves
 * only those two classes here. `others`: more members ({ bindings, own }) in the same Miniflare, each
 * with its own vars and socket, sharing the first's KV, D1, R2 and objects as one account's
 * workers share them (the freshness rounds' vantage points). */
function memberWorkers(bindings, own, others = []) {
  const dir = path.join(ROOT, "build-member");
  const byScript = (binding, className) => ({ [binding]: { className, scriptName: MAIN_WORKER, useSQLite: true } });
  const member = {
    ...workerOptions(bindings, own),
    scriptPath: path.join(dir, "index.js"),
    modulesRoot: dir,
    durableObjects: { ...byScript(BINDINGS.durableObject, BINDINGS.durableObjectClass), ...byScript(BINDINGS.runs, BINDINGS.runsClass) },
  };
  const objects = {
    ...workerOptions(bindings),
    durableObjects: {
      [BINDINGS.durableObject]: { className: BINDINGS.durableObjectClass, useSQLite: true },
      [BINDINGS.runs]: { className: BINDINGS.runsClass, useSQLite: true },
    },
  };
  const more = others.map((o, i) => ({
    name: `${MAIN_WORKER}-member-${i + 2}`,
    ...member,
    ...workerOptions(o.bindings, o.own),
    scriptPath: member.scriptPath,
    modulesRoot: dir,
    durableObjects: member.durableObjects,
  }));
  return [{ name: `${MAIN_WORKER}-member`, ...member }, ...more, { name: MAIN_WORKER, ...objects }];
}

/** wrangler's variable for a local Hyperdrive binding's database; Miniflare takes it as the
 * `hyperdrives` option (a direct connection to that database: no pool, no cache). */
export const LOCAL_HYPERDRIVE = "CLOUDFLARE_HYPERDRIVE_LOCAL_CONNECTION_STRING_BENCH_HYPERDRIVE";

/** Options for `new Miniflare(...)`: the bundle, every local binding, and `bindings` (vars). */
export function workerOptions(allBindings, extra = {}) {
  const { [LOCAL_HYPERDRIVE]: hyperdrive, ...bindings } = allBindings;
  return {
    ...(hyperdrive ? { hyperdrives: { BENCH_HYPERDRIVE: hyperdrive } } : {}),
    modules: true,
    scriptPath: path.join(ROOT, "build/index.js"),
    modulesRoot: path.join(ROOT, "build"),
    modulesRules: [
      { type: "ESModule", include: ["**/*.js"] },
      { type: "CompiledWasm", include: ["**/*.wasm"] },
    ],
    // wrangler.toml's: on or before the bundled workerd's date.
    compatibilityDate: compatibilityDate(),
    // wrangler.toml's, so the local runtime is the deployed one (global_fetch_strictly_public).
    compatibilityFlags: compatibilityFlags(),
    kvNamespaces: [BINDINGS.kv],
    // wrangler.toml's [[migrations]] new_sqlite_classes: the class keeps its rows in SQLite.
    durableObjects: {
      [BINDINGS.durableObject]: { className: BINDINGS.durableObjectClass, useSQLite: true },
      [BINDINGS.probes]: { className: BINDINGS.probesClass, useSQLite: true },
      [BINDINGS.runs]: { className: BINDINGS.runsClass, useSQLite: true },
      [BINDINGS.directory]: { className: BINDINGS.directoryClass, useSQLite: true },
    },
    d1Databases: [BINDINGS.d1],
    r2Buckets: [BINDINGS.r2],
    // What the reports name as its build (GET /'s `provenance`); the caller's own value wins.
    bindings: { KVBENCH_PROVENANCE: JSON.stringify(provenance("local")), ...bindings },
    ...extra,
  };
}

/** The statements of migrations/*.sql, in file order (what `wrangler d1 migrations apply` runs). */
export function migrationStatements() {
  const dir = path.join(ROOT, "migrations");
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith(".sql"))
    .sort()
    .flatMap((f) =>
      fs
        .readFileSync(path.join(dir, f), "utf8")
        .split("\n")
        .filter((line) => !line.trim().startsWith("--"))
        .join("\n")
        .split(";")
        .map((s) => s.trim())
        .filter(Boolean),
    );
}

/** Applies the D1 migrations to a running Miniflare's local database. */
export async function applyMigrations(mf) {
  const db = await mf.getD1Database(BINDINGS.d1);
  for (const statement of migrationStatements()) await db.prepare(statement).run();
}

/** `compatibility_date` of a wrangler.toml (the repository's by default): every local runtime
 * the tests and benches start runs on the date the deploy sends. */
export function compatibilityDate(file = path.join(ROOT, "wrangler.toml")) {
  const line = fs.readFileSync(file, "utf8").match(/^compatibility_date\s*=\s*"(\d{4}-\d{2}-\d{2})"/m);
  if (!line) throw new Error(`${file}: no compatibility_date`);
  return line[1];
}

/** `compatibility_flags` of the root wrangler.toml (one line: `compatibility_flags = ["a", "b"]`). */
export function compatibilityFlags(file = path.join(ROOT, "wrangler.toml")) {
  const line = fs.readFileSync(file, "utf8").match(/^compatibility_flags\s*=\s*\[([^\]]*)\]/m);
  return line ? [...line[1].matchAll(/"([^"]+)"/g)].map((m) => m[1]) : [];
}

/** `[vars]` of a wrangler.toml: a flat `KEY = "value"` table is all we need to read. */
export function tomlVars(file) {
  const vars = {};
  let inVars = false;
  for (const line of fs.readFileSync(file, "utf8").split("\n")) {
    const t = line.trim();
    if (t.startsWith("[")) inVars = t === "[vars]";
    const m = inVars && t.match(/^([A-Z0-9_]+)\s*=\s*"([^"]*)"/);
    if (m) vars[m[1]] = m[2];
  }
  return vars;
}
