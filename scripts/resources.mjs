#!/usr/bin/env node
// The account's resources for `npm run deploy`, found or made explicitly, and the main worker's
// deploy configuration with their ids — so the same commands work in a terminal, a pipe and CI.
//
// wrangler (>= 4.45) can create a KV namespace, D1 database or R2 bucket on deploy, but writes the
// ids back into wrangler.toml only when stdin and stdout are terminals and CI is unset
// (`provisionBindings` → `isNonInteractiveOrCI()`); piped, the next step
// (`wrangler d1 migrations apply --remote`) has no database_id. So nothing here relies on it:
// each resource is looked up by name through wrangler's own list commands (which use the
// deployer's login or CLOUDFLARE_API_TOKEN) and created only when missing, and the ids go into a
// generated configuration, `<dir>/kvbench.jsonc`, which every later step deploys from.
// wrangler.toml is never written to.
//
// Names: a KV namespace's title is wrangler's own provisioning default (`<worker>-<binding in
// kebab case>`, e.g. `kvbench-bench-kv`), so a namespace that an interactive deploy made is the
// one found here; D1 databases and R2 buckets by the names in wrangler.toml; the Hyperdrive
// configuration `kvbench` when POSTGRES_URL is set (its id only: the connection string, which
// holds the password, is never printed). The R2 bucket also gets the lifecycle rule
// `kvbench-r2-expired` (R2_LIFECYCLE), once.
//
// Usage: node scripts/resources.mjs [--config wrangler.toml] [--out .fleet/kvbench.jsonc]
// Prints one line per resource: `<kind> <binding> <name> <id> found|created`.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { parsePostgresUrl } from "./pg-url.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const WRANGLER = path.join(ROOT, "node_modules/.bin/wrangler");
/** The Hyperdrive configuration's name (the hyperdrive store's database). */
export const HYPERDRIVE_NAME = "kvbench";
/** The Hyperdrive binding the worker reads (crates/spec/src/store.rs). */
export const HYPERDRIVE_BINDING = "BENCH_HYPERDRIVE";
/** Each wrangler call ends within this (KVBENCH_STEP_TIMEOUT_S, as every step of npm run deploy;
 * 300 s by default): a hung API is a failed deploy naming its step, not a hung one. */
const WRANGLER_TIMEOUT_S = Number(process.env.KVBENCH_STEP_TIMEOUT_S) > 0 ? Number(process.env.KVBENCH_STEP_TIMEOUT_S) : 300;

function fail(message) {
  console.error(`[kvbench] error: ${message}`);
  process.exit(1);
}

/** `text` with every secret of this deploy replaced (the password of POSTGRES_URL in each form
 * a tool might print it). */
export function redact(text, secrets = deploySecrets()) {
  let out = String(text ?? "");
  for (const s of secrets) if (s && s.length >= 4) out = out.split(s).join("[redacted]");
  return out;
}

function deploySecrets() {
  const out = [process.env.CLOUDFLARE_API_TOKEN, process.env.BENCH_TOKEN];
  const pg = process.env.POSTGRES_URL;
  if (pg) {
    out.push(pg);
    try {
      const { password } = parsePostgresUrl(pg);
      if (password) out.push(password, encodeURIComponent(password));
    } catch {
      /* not a URL (npm run deploy refuses it first): the whole string is redacted above */
    }
  }
  return out.filter(Boolean);
}

/** Runs wrangler with `args`, no terminal, within the deadline (coreutils `timeout`, which stops
 * wrangler's whole process group: wrangler's bin runs the CLI in a child process); returns its
 * stdout and whether the deadline stopped it. */
function wrangler(args) {
  const r = spawnSync("timeout", ["--kill-after=10", String(WRANGLER_TIMEOUT_S), WRANGLER, ...args], {
    cwd: ROOT,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
  });
  const timedOut = r.status === 124 || r.status === 137;
  return { ok: r.status === 0, timedOut, out: r.stdout ?? "", err: `${r.stderr ?? ""}${r.error ? r.error.message : ""}` };
}

function must(args, what, { showOutput = true } = {}) {
  const r = wrangler(args);
  if (r.timedOut) fail(`${what}: no answer within ${WRANGLER_TIMEOUT_S} s (KVBENCH_STEP_TIMEOUT_S); stopped wrangler ${args[0]} ${args[1] ?? ""}`.trimEnd());
  if (!r.ok) {
    const detail = showOutput ? `\n${redact(`${r.out}\n${r.err}`).trim().split("\n").slice(-15).join("\n")}` : " (its output is not shown: it may quote a secret; run it by hand to see why)";
    fail(`${what} failed: wrangler ${args.filter((a) => !a.startsWith("--connection-string")).join(" ")}${detail}`);
  }
  return r.out;
}

/** The JSON wrangler printed (its banner, if any, comes first). */
function jsonOf(out, what) {
  const start = out.search(/^\s*[[{]/m);
  try {
    return JSON.parse(out.slice(start));
  } catch {
    fail(`${what}: wrangler did not print JSON:\n${redact(out).slice(0, 500)}`);
  }
}

/** wrangler's default name for a provisioned resource of `binding` (runProvisioningFlow). */
export const defaultName = (worker, binding) => `${worker}-${binding.toLowerCase().replaceAll("_", "-")}`;

function kvNamespace(worker, binding) {
  const title = defaultName(worker, binding);
  const find = () => jsonOf(must(["kv", "namespace", "list"], "listing KV namespaces"), "kv namespace list").find((n) => n.title === title);
  let found = find();
  let how = "found";
  if (!found) {
    must(["kv", "namespace", "create", title], `creating the KV namespace ${title}`);
    found = find();
    how = "created";
  }
  if (!found?.id) fail(`the KV namespace ${title} was created but is not listed`);
  return { id: found.id, name: title, how };
}

function d1Database(name) {
  const find = () => jsonOf(must(["d1", "list", "--json"], "listing D1 databases"), "d1 list").find((d) => d.name === name);
  let found = find();
  let how = "found";
  if (!found) {
    must(["d1", "create", name], `creating the D1 database ${name}`);
    found = find();
    how = "created";
  }
  if (!found?.uuid) fail(`the D1 database ${name} was created but is not listed`);
  return { id: found.uuid, name, how };
}

function r2Bucket(name) {
  const info = wrangler(["r2", "bucket", "info", name]);
  if (info.timedOut) fail(`looking up the R2 bucket ${name}: no answer within ${WRANGLER_TIMEOUT_S} s (KVBENCH_STEP_TIMEOUT_S)`);
  if (info.ok) return { id: name, name, how: "found" };
  must(["r2", "bucket", "create", name], `creating the R2 bucket ${name}`);
  return { id: name, name, how: "created" };
}

/** The benchmark's lifecycle rule on its bucket: the backstop of the worker's sweep of expired
 * objects (src/stores/r2/sweep.rs), whatever the write rate — R2 deletes every object under the `r2`
 * store's namespace a day after its last write (the longest TTL is a day, so no live value
 * goes). Added once: `lifecycle add` appends a rule, so an existing one is looked up first. */
export const R2_LIFECYCLE = { rule: "kvbench-r2-expired", prefix: "kvbench:r2:", days: 1 };

function r2Lifecycle(bucket) {
  const { rule, prefix, days } = R2_LIFECYCLE;
  // `lifecycle list` prints each rule as labelled lines (`name:  <id>`); no --json in 4.86.
  const listed = must(["r2", "bucket", "lifecycle", "list", bucket], `listing the lifecycle rules of the R2 bucket ${bucket}`).replace(/\x1b\[[0-9;]*m/g, "");
  if (new RegExp(`^name:\\s+${rule}\\s*$`, "m").test(listed)) return { id: rule, how: "found" };
  must(
    ["r2", "bucket", "lifecycle", "add", bucket, "--name", rule, "--prefix", prefix, "--expire-days", String(days)],
    `adding the lifecycle rule ${rule} to the R2 bucket ${bucket}`,
  );
  return { id: rule, how: "created" };
}

function hyperdriveConfig(name, connectionString) {
  // `hyperdrive list` prints a table (no --json in wrangler 4.86): `│ <id> │ <name> │ …`.
  const find = () => {
    const out = must(["hyperdrive", "list"], "listing Hyperdrive configurations");
    return out.match(new RegExp(`([0-9a-f]{32})\\s*│\\s*${name}\\s*│`))?.[1];
  };
  let id = find();
  let how = "found";
  if (!id) {
    // The connection string is an argument (wrangler takes it no other way); its output is
    // never shown, since it may quote the string.
    must(["hyperdrive", "create", name, `--connection-string=${connectionString}`], `creating the Hyperdrive configuration ${name}`, { showOutput: false });
    id = find();
    how = "created";
  }
  if (!id) fail(`the Hyperdrive configuration ${name} was created but is not listed`);
  return { id, name, how };
}

/**
 * The main worker's deploy configuration: `raw` (the config in `configDir`, as wrangler reads it)
 * with the resources' ids, paths relative to `outDir`, and no build step (npm run deploy builds
 * first).
 */
export function deployConfig(raw, ids, configDir, outDir) {
  const rel = (p) => path.relative(outDir, path.resolve(configDir, p)) || ".";
  const { build, ...rest } = raw;
  return {
    ...rest,
    main: rel(raw.main),
    kv_namespaces: (raw.kv_namespaces ?? []).map((n) => ({ ...n, id: ids.kv[n.binding] })),
    d1_databases: (raw.d1_databases ?? []).map((d) => ({ ...d, database_id: ids.d1[d.binding], ...(d.migrations_dir ? { migrations_dir: rel(d.migrations_dir) } : {}) })),
    ...(ids.hyperdrive ? { hyperdrive: [{ binding: HYPERDRIVE_BINDING, id: ids.hyperdrive }] } : {}),
  };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const { values } = parseArgs({
    options: {
      config: { type: "string", default: path.join(ROOT, "wrangler.toml") },
      out: { type: "string", default: path.join(ROOT, ".fleet/kvbench.jsonc") },
    },
  });
  const { experimental_readRawConfig } = await import("wrangler");
  const { rawConfig } = experimental_readRawConfig({ config: values.config });
  if (!rawConfig?.name) fail(`${values.config}: no worker name`);
  const ids = { kv: {}, d1: {}, hyperdrive: null };
  const lines = [];
  for (const n of rawConfig.kv_namespaces ?? []) {
    const r = n.id ? { id: n.id, name: n.binding, how: "given" } : kvNamespace(rawConfig.name, n.binding);
    ids.kv[n.binding] = r.id;
    lines.push(`kv ${n.binding} ${r.name} ${r.id} ${r.how}`);
  }
  for (const d of rawConfig.d1_databases ?? []) {
    const r = d.database_id ? { id: d.database_id, how: "given" } : d1Database(d.database_name);
    ids.d1[d.binding] = r.id;
    lines.push(`d1 ${d.binding} ${d.database_name} ${r.id} ${r.how}`);
  }
  for (const b of rawConfig.r2_buckets ?? []) {
    const r = r2Bucket(b.bucket_name);
    lines.push(`r2 ${b.binding} ${b.bucket_name} ${r.id} ${r.how}`);
    const rule = r2Lifecycle(b.bucket_name);
    lines.push(`r2-lifecycle ${b.binding} ${b.bucket_name} ${rule.id} ${rule.how}`);
  }
  if (process.env.POSTGRES_URL) {
    const r = hyperdriveConfig(HYPERDRIVE_NAME, process.env.POSTGRES_URL);
    ids.hyperdrive = r.id;
    lines.push(`hyperdrive ${HYPERDRIVE_BINDING} ${r.name} ${r.id} ${r.how}`);
  }
  const out = path.resolve(values.out);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  const header = "// Generated by scripts/resources.mjs from wrangler.toml and the account's resources;\n// do not edit: npm run deploy writes it anew.\n";
  fs.writeFileSync(out, `${header}${JSON.stringify(deployConfig(rawConfig, ids, path.dirname(path.resolve(values.config)), path.dirname(out)), null, 2)}\n`);
  for (const l of lines) console.log(l);
}
