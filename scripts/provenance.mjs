// What a report says it was measured with: the worker's build as a JSON object of text, which
// the scripts that serve (scripts/worker-options.mjs) or deploy (scripts/deploy.sh) the worker
// write into its var KVBENCH_PROVENANCE. `GET /` gives it as `provenance`, and `kvbench run` and
// `GET /report` put it on the page (crates/report: Provenance). Nothing here is a secret: the
// commit, and the versions of what measures — wrangler, workerd, Miniflare, workers-rs, the
// store clients' crates — and, on the local stack, of the servers standing in for the stores.
//
//   node scripts/provenance.mjs local|deployed    prints the object
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** The crates of the worker whose versions a report names: the platform's and the stores'. */
const CRATES = { worker: "workers-rs", "postgres-protocol": "postgres-protocol", prost: "prost (Deno KV)" };
/** The npm packages that run (locally) or deploy it. */
const PACKAGES = ["wrangler", "workerd", "miniflare"];

function run(cmd, args) {
  try {
    return execFileSync(cmd, args, { cwd: ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"], timeout: 5000 }).trim();
  } catch {
    return null;
  }
}

/** `0123abcd4567` of HEAD, `-dirty` when tracked files changed; `unknown` outside a checkout. */
export function commit() {
  const head = run("git", ["rev-parse", "--short=12", "HEAD"]);
  if (!head) return "unknown";
  const changed = run("git", ["status", "--porcelain", "--untracked-files=no"]);
  return changed ? `${head}-dirty` : head;
}

/** Versions of `names` in Cargo.lock (the first of each name). */
export function lockedCrates(lockText, names) {
  const found = {};
  for (const block of lockText.split("[[package]]")) {
    const name = /^name = "([^"]+)"/m.exec(block)?.[1];
    const version = /^version = "([^"]+)"/m.exec(block)?.[1];
    if (name && version && names.includes(name) && !(name in found)) found[name] = version;
  }
  return found;
}

function packageVersion(name) {
  try {
    return JSON.parse(fs.readFileSync(path.join(ROOT, "node_modules", name, "package.json"), "utf8")).version;
  } catch {
    return null;
  }
}

/** The local stack's servers: redis-server, denokv (the version setup installs) and PostgreSQL. */
function localServers() {
  const out = {};
  const redis = /v=(\S+)/.exec(run("redis-server", ["--version"]) ?? "")?.[1];
  if (redis) out["redis-server"] = redis;
  const denokv = /DENOKV_VERSION=(\S+)/.exec(fs.readFileSync(path.join(ROOT, "scripts/setup.sh"), "utf8"))?.[1];
  if (denokv) out.denokv = denokv.replace(/["']/g, "");
  const pgDirs = (() => {
    try {
      return fs.readdirSync("/usr/lib/postgresql").map((v) => `/usr/lib/postgresql/${v}/bin/pg_ctl`);
    } catch {
      return [];
    }
  })();
  for (const pgCtl of [process.env.PG_BIN_DIR && path.join(process.env.PG_BIN_DIR, "pg_ctl"), ...pgDirs].filter(Boolean)) {
    const v = /\(PostgreSQL\) (\S+)/.exec(run(pgCtl, ["--version"]) ?? "")?.[1];
    if (v) {
      out.postgres = v;
      break;
    }
  }
  return out;
}

let cached = new Map();

/** The object for a worker on `stack` (`local` or `deployed`), computed once per process. */
export function provenance(stack) {
  if (cached.has(stack)) return cached.get(stack);
  const out = { stack, commit: commit() };
  const cargo = fs.readFileSync(path.join(ROOT, "Cargo.toml"), "utf8");
  const kvbench = /^version = "([^"]+)"/m.exec(cargo)?.[1];
  if (kvbench) out.kvbench = kvbench;
  // Deployed, the runtime is Cloudflare's: only wrangler, which uploads it, is ours.
  for (const name of stack === "local" ? PACKAGES : ["wrangler"]) {
    const v = packageVersion(name);
    if (v) out[name] = v;
  }
  const locked = lockedCrates(fs.readFileSync(path.join(ROOT, "Cargo.lock"), "utf8"), Object.keys(CRATES));
  for (const [name, shown] of Object.entries(CRATES)) if (locked[name]) out[shown] = locked[name];
  if (stack === "local") Object.assign(out, localServers());
  cached.set(stack, out);
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const stack = process.argv[2];
  if (stack !== "local" && stack !== "deployed") {
    console.error("usage: node scripts/provenance.mjs local|deployed");
    process.exit(2);
  }
  process.stdout.write(`${JSON.stringify(provenance(stack))}\n`);
}
