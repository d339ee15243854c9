// A stand-in for the Cloudflare v4 API: the routes that `npm run deploy` reaches through the
// project's pinned wrangler (`CLOUDFLARE_API_BASE_URL`), answered with Cloudflare's envelope
// `{success, errors, messages, result}` (+ `result_info` on lists), and every request recorded.
//
// Shapes come from wrangler's own calls (node_modules/wrangler/wrangler-dist/cli.js: the paths it
// builds, the fields it reads) and from Cloudflare's published API schema (cloudflare/api-schemas);
// each route names its source below. Where Cloudflare refuses an upload, so does the stand-in:
// a binding to a KV namespace, D1 database, R2 bucket, Hyperdrive configuration, service or Durable
// Object class that does not exist, two bindings of one name, a migration whose `old_tag` is not the
// script's current tag, a compatibility date after today, a placement region outside Cloudflare's
// published list (tests/e2e/cf-placement-regions.json, vendored with its sources) — so a deploy
// that only works because nothing checks it fails here too. An upload's `keep_bindings` keeps the
// script's earlier bindings of those types that the upload does not set; without it they go.
// D1 queries run against a real SQLite database (the `sqlite3` CLI that scripts/setup.sh installs).
//
// It is also the workers.dev front door: a request carrying `X-Forwarded-Host:
// <script>.<subdomain>.workers.dev` is answered 404 ("There is nothing here yet") unless that
// script is deployed with its workers.dev route on, and otherwise proxied to the origin that
// `serveWorkers(script => origin)` gives (the test's local run of the built worker).
//
// As a module: `startCfApi({ token, accountId })` → `{ url, requests, state, failOn(), close() }`.
// As a script: `node tests/e2e/cf-api.mjs [--port N]` prints the base URL and the environment to
// point wrangler at it, and serves until stopped.
import { execFileSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const SQLITE3 = process.env.SQLITE3_BIN || "sqlite3";
/** Cloudflare's placement regions (vendored, with its sources and date). */
export const PLACEMENT = JSON.parse(fs.readFileSync(new URL("./cf-placement-regions.json", import.meta.url), "utf8"));
export const PLACEMENT_REGIONS = new Set(PLACEMENT.providers.flatMap((p) => p.regions.map((r) => `${p.id}:${r}`)));
/** Bodies larger than this are refused (wrangler's uploads are a few MiB at most). */
const MAX_BODY_BYTES = 64 * 1024 * 1024;

const hex = (n) => crypto.randomBytes(n).toString("hex");
const uuid = () => crypto.randomUUID();
const now = () => new Date().toISOString();

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}
const notFound = (code, message) => new ApiError(404, code, message);
const bad = (code, message) => new ApiError(400, code, message);

/** The envelope of every answer (Cloudflare API v4). */
function envelope(result, resultInfo) {
  return { success: true, errors: [], messages: [], result, ...(resultInfo ? { result_info: resultInfo } : {}) };
}

/** One page of `items` as Cloudflare pages lists (`page`, `per_page`; `result_info`). */
function paged(items, query, defaultPerPage = 20) {
  const perPage = Math.max(1, Number(query.get("per_page") ?? defaultPerPage));
  const page = Math.max(1, Number(query.get("page") ?? 1));
  const slice = items.slice((page - 1) * perPage, page * perPage);
  return { result: slice, resultInfo: { page, per_page: perPage, count: slice.length, total_count: items.length, total_pages: Math.ceil(items.length / perPage) } };
}

async function readBody(req) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new ApiError(413, 10000, `request body over ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** A multipart upload's parts, parsed by the runtime's own FormData (undici). */
async function multipart(req, body) {
  const form = await new Request("http://x/", { method: "POST", headers: { "content-type": req.headers["content-type"] }, body }).formData();
  const parts = {};
  for (const [name, value] of form.entries()) {
    parts[name] = typeof value === "string" ? { text: value } : { type: value.type, size: value.size, text: await value.text() };
  }
  if (!parts.metadata) throw bad(10021, "the upload has no metadata part");
  return { metadata: JSON.parse(parts.metadata.text), parts };
}

/** The stand-in's state: one account, its resources and workers. */
function newState(accountId, subdomain, dir) {
  return {
    accountId,
    subdomain,
    dir,
    kv: new Map(), // id -> { id, title }
    d1: new Map(), // uuid -> { uuid, name, created_at, file }
    r2: new Map(), // name -> { name, creation_date, location }
    r2Lifecycle: new Map(), // bucket name -> its lifecycle rules
    hyperdrive: new Map(), // id -> { id, name, origin }
    scripts: new Map(), // name -> Script
  };
}

function newScript(name) {
  return {
    name,
    id: name,
    created_on: now(),
    modified_on: now(),
    etag: hex(16),
    tag: hex(16),
    metadata: null,
    modules: [],
    bindings: [],
    secrets: new Map(),
    migrationTag: undefined,
    classes: new Set(),
    subdomain: { enabled: false, previews_enabled: false },
    schedules: [],
    versions: [],
    deployments: [],
    placement: undefined,
    compatibility_date: undefined,
    compatibility_flags: [],
  };
}

/** Runs `sql` against the D1 database's SQLite file; one result per statement run, like D1. */
function d1Query(db, sql, params) {
  if (params?.length) throw bad(7500, "the stand-in runs D1 queries without bound parameters");
  let out;
  try {
    out = execFileSync(SQLITE3, ["-bail", "-json", db.file], { input: sql, encoding: "utf8", stdio: ["pipe", "pipe", "pipe"] });
  } catch (e) {
    throw bad(7500, `D1_ERROR: ${String(e.stderr || e.message).trim()}`);
  }
  // sqlite3 -json prints one array per statement that returns rows; D1 returns one result per
  // statement. The stand-in answers with the rows of the last statement that returned any.
  const arrays = out.trim() ? out.trim().split(/\n(?=\[)/).map((s) => JSON.parse(s)) : [];
  const results = arrays.at(-1) ?? [];
  return [{ results, success: true, meta: { served_by: "cf-api-standin", duration: 0, changes: 0, last_row_id: 0, changed_db: /^\s*(create|insert|update|delete|drop|alter)/im.test(sql), size_after: fs.statSync(db.file).size, rows_read: 0, rows_written: 0 } }];
}

/** The checks Cloudflare makes of an upload's metadata against the account (each a real refusal). */
function applyUpload(state, script, metadata, parts) {
  if (!metadata.main_module || !parts[metadata.main_module]) throw bad(10021, `main_module ${metadata.main_module} is not a part of the upload`);
  // A compatibility date after today (UTC) is refused: the runtime has no such date yet.
  const today = new Date().toISOString().slice(0, 10);
  if (metadata.compatibility_date && !(/^\d{4}-\d{2}-\d{2}$/.test(metadata.compatibility_date) && metadata.compatibility_date <= today)) {
    throw bad(10021, `Invalid compatibility_date ${metadata.compatibility_date}: it is not a date on or before ${today}`);
  }
  const region = metadata.placement?.region;
  if (region !== undefined && !PLACEMENT_REGIONS.has(region)) {
    throw bad(10021, `placement region '${region}' is not a supported region (GET /accounts/:account_id/workers/placement/regions lists them)`);
  }
  const names = new Set();
  for (const b of metadata.bindings ?? []) {
    if (names.has(b.name)) throw bad(10021, `Binding name '${b.name}' is used more than once`);
    names.add(b.name);
  }
  // Migrations first: a binding may name a class the same upload creates.
  const classes = new Set(script.classes);
  let migrationTag = script.migrationTag;
  if (metadata.migrations) {
    const m = metadata.migrations;
    if ((m.old_tag ?? undefined) !== migrationTag) {
      throw bad(10079, `Cannot apply migration: old_tag ${m.old_tag ?? "(none)"} does not match the script's current tag ${migrationTag ?? "(none)"}`);
    }
    const steps = m.steps ?? [{ new_classes: m.new_classes, new_sqlite_classes: m.new_sqlite_classes, deleted_classes: m.deleted_classes }];
    for (const step of steps) {
      for (const c of [...(step.new_classes ?? []), ...(step.new_sqlite_classes ?? [])]) {
        if (classes.has(c)) throw bad(10074, `Cannot create Durable Object class ${c}: it already exists`);
        classes.add(c);
      }
      for (const c of step.deleted_classes ?? []) classes.delete(c);
    }
    migrationTag = m.new_tag;
  }
  const secrets = new Map();
  const bindings = [];
  for (const b of metadata.bindings ?? []) {
    switch (b.type) {
      case "kv_namespace":
        if (!state.kv.has(b.namespace_id)) throw bad(10041, `KV namespace '${b.namespace_id}' not found (binding ${b.name})`);
        break;
      case "d1":
        if (!state.d1.has(b.id)) throw bad(10181, `D1 database '${b.id}' not found (binding ${b.name})`);
        break;
      case "r2_bucket":
        if (!state.r2.has(b.bucket_name)) throw bad(10085, `R2 bucket '${b.bucket_name}' not found (binding ${b.name})`);
        break;
      case "hyperdrive":
        if (!state.hyperdrive.has(b.id)) throw bad(10146, `Hyperdrive config '${b.id}' not found (binding ${b.name})`);
        break;
      case "service":
        if (!state.scripts.has(b.service)) throw bad(10143, `Could not resolve service binding '${b.name}'. Target script '${b.service}' not found.`);
        break;
      case "durable_object_namespace": {
        const owner = b.script_name && b.script_name !== script.name ? state.scripts.get(b.script_name) : null;
        if (b.script_name && b.script_name !== script.name && !owner) throw bad(10061, `Durable Object binding ${b.name}: script '${b.script_name}' not found`);
        const has = owner ? owner.classes.has(b.class_name) : classes.has(b.class_name);
        if (!has) throw bad(10061, `Durable Object binding ${b.name}: class '${b.class_name}' is not exported by a migration of '${b.script_name ?? script.name}'`);
        break;
      }
      case "secret_text":
        secrets.set(b.name, b.text);
        continue; // kept apart from the listed bindings: never echoed back
      case "inherit": {
        if (script.secrets.has(b.name)) secrets.set(b.name, script.secrets.get(b.name));
        else if (!script.bindings.some((x) => x.name === b.name)) throw bad(10021, `binding ${b.name}: nothing to inherit`);
        else bindings.push(script.bindings.find((x) => x.name === b.name));
        continue;
      }
      default:
        break;
    }
    bindings.push(b);
  }
  // keep_bindings: the script's earlier bindings of those types that this upload does not set
  // stay (wrangler deploy sends ["secret_text", "secret_key"]: "secrets are never deleted by
  // deployments"; `keep_vars` adds plain_text and json); every other earlier binding goes.
  const keep = new Set(metadata.keep_bindings ?? []);
  if (keep.has("secret_text")) for (const [k, v] of script.secrets) if (!secrets.has(k) && !names.has(k)) secrets.set(k, v);
  for (const b of script.bindings) if (keep.has(b.type) && !names.has(b.name)) bindings.push(b);
  Object.assign(script, {
    metadata,
    modules: Object.keys(parts).filter((p) => p !== "metadata"),
    // Each module's size in bytes (which build was uploaded).
    moduleSizes: Object.fromEntries(Object.entries(parts).filter(([p]) => p !== "metadata").map(([p, v]) => [p, v.size ?? Buffer.byteLength(v.text)])),
    bindings,
    secrets,
    classes,
    migrationTag,
    placement: metadata.placement,
    compatibility_date: metadata.compatibility_date,
    compatibility_flags: metadata.compatibility_flags ?? [],
    modified_on: now(),
    etag: hex(16),
  });
  const version = { id: uuid(), number: script.versions.length + 1, created_on: now(), metadata: { source: "wrangler" } };
  script.versions.push(version);
  return version;
}

/** Script settings as `GET …/scripts/:name/settings` answers them (secrets listed without text). */
function settingsOf(script) {
  return {
    bindings: [...script.bindings, ...[...script.secrets.keys()].map((name) => ({ type: "secret_text", name }))],
    compatibility_date: script.compatibility_date,
    compatibility_flags: script.compatibility_flags,
    placement: script.placement ?? {},
    logpush: false,
    tail_consumers: null,
    observability: null,
    usage_model: "standard",
    migration_tag: script.migrationTag,
  };
}

/** The route table: [method, path pattern, handler(ctx, ...groups)]. `A` is the account segment. */
function routes(state) {
  const A = "/accounts/([^/]+)";
  const script = (name) => {
    const s = state.scripts.get(name);
    if (!s) throw notFound(10007, `This Worker does not exist on your account. [code: 10007] (${name})`);
    return s;
  };
  const bucketOf = (name) => state.r2.get(name) ?? (() => { throw notFound(10006, "The specified bucket does not exist."); })();
  return [
    // wrangler's whoami and requireAuth (src/user/whoami.ts): the token, the user, the accounts.
    ["GET", "/user/tokens/verify", () => ({ id: "standin-token", status: "active" })],
    ["GET", "/user", () => ({ id: "standin-user", email: "deployer@example.com" })],
    ["GET", "/accounts", (c) => paged([{ id: state.accountId, name: "Stand-in account" }], c.query)],
    ["GET", "/memberships", (c) => paged([{ id: "m1", account: { id: state.accountId, name: "Stand-in account" }, status: "accepted" }], c.query)],
    // An account without a workers.dev subdomain answers without one (startCfApi({ subdomain: null })).
    ["GET", `${A}/workers/subdomain`, () => (state.subdomain ? { subdomain: state.subdomain } : {})],
    // Cloudflare's placement regions (api-schemas worker-placement-list-regions).
    ["GET", `${A}/workers/placement/regions`, () => ({ providers: PLACEMENT.providers })],
    // KV (wrangler src/kv/helpers.ts: listKVNamespaces, createKVNamespace; api-schemas workers-kv).
    ["GET", `${A}/storage/kv/namespaces`, (c) => paged([...state.kv.values()].sort((a, b) => a.title.localeCompare(b.title)), c.query)],
    ["POST", `${A}/storage/kv/namespaces`, (c) => {
      const { title } = c.json();
      if (!title) throw bad(10019, "title is required");
      if ([...state.kv.values()].some((n) => n.title === title)) throw bad(10014, `A namespace with this account ID and title already exists`);
      const ns = { id: hex(16), title, supports_url_encoding: true };
      state.kv.set(ns.id, ns);
      return ns;
    }],
    ["GET", `${A}/storage/kv/namespaces/([0-9a-f]+)`, (c, _a, id) => state.kv.get(id) ?? (() => { throw notFound(10013, "namespace not found"); })()],
    // D1 (wrangler src/d1/list.ts, create.ts, execute.ts → …/d1/database/:id/query).
    ["GET", `${A}/d1/database`, (c) => {
      const name = c.query.get("name");
      const all = [...state.d1.values()].filter((d) => !name || d.name === name).map(({ file, ...d }) => d);
      return paged(all, c.query, 100);
    }],
    ["POST", `${A}/d1/database`, (c) => {
      const { name } = c.json();
      if (!name) throw bad(7400, "name is required");
      if ([...state.d1.values()].some((d) => d.name === name)) throw bad(7502, `A database with that name already exists`);
      const db = { uuid: uuid(), name, created_at: now(), version: "production", num_tables: 0, file_size: 0, file: path.join(state.dir, `d1-${name}.sqlite`) };
      fs.writeFileSync(db.file, "");
      state.d1.set(db.uuid, db);
      const { file, ...shown } = db;
      return shown;
    }],
    // By id, or by name: wrangler >= 4.102 finds a database bound without an id this way for
    // `d1 … --remote` (GET …/d1/database/<name>?fields=uuid,name).
    ["GET", `${A}/d1/database/([A-Za-z0-9_-]+)`, (c, _a, id) => {
      const db = state.d1.get(id) ?? [...state.d1.values()].find((d) => d.name === id);
      if (!db) throw notFound(7404, "The database could not be found");
      const { file, ...shown } = db;
      return { ...shown, file_size: fs.statSync(file).size };
    }],
    ["POST", `${A}/d1/database/([0-9a-f-]+)/(?:query|raw)`, (c, _a, id) => {
      const db = state.d1.get(id);
      if (!db) throw notFound(7404, "The database could not be found");
      const { sql, params } = c.json();
      return d1Query(db, sql, params);
    }],
    // R2 (wrangler src/r2/helpers.ts: listR2Buckets → result.buckets, createR2Bucket, getR2Bucket).
    ["GET", `${A}/r2/buckets`, () => ({ buckets: [...state.r2.values()] })],
    ["POST", `${A}/r2/buckets`, (c) => {
      const { name, locationHint } = c.json();
      if (!/^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$/.test(name ?? "")) throw bad(10005, `The specified bucket name is not valid`);
      if (state.r2.has(name)) throw new ApiError(409, 10004, "The bucket you tried to create already exists, and you own it.");
      const bucket = { name, creation_date: now(), location: locationHint ?? "WNAM", storage_class: "Standard" };
      state.r2.set(name, bucket);
      return bucket;
    }],
    ["GET", `${A}/r2/buckets/([a-z0-9-]+)`, (c, _a, name) => state.r2.get(name) ?? (() => { throw notFound(10006, "The specified bucket does not exist."); })()],
    // Object lifecycle rules (wrangler src/r2/helpers/bucket.ts: getLifecycleRules → result.rules,
    // putLifecycleRules → PUT {rules}, the whole set; api-schemas r2-put-bucket-lifecycle-configuration).
    ["GET", `${A}/r2/buckets/([a-z0-9-]+)/lifecycle`, (c, _a, name) => {
      bucketOf(name);
      return { rules: state.r2Lifecycle.get(name) ?? [] };
    }],
    ["PUT", `${A}/r2/buckets/([a-z0-9-]+)/lifecycle`, (c, _a, name) => {
      bucketOf(name);
      state.r2Lifecycle.set(name, checkLifecycleRules(c.json().rules ?? []));
      return {};
    }],
    // GraphQL analytics: `r2 bucket info` asks for the bucket's storage metrics
    // (r2/helpers/bucket.ts getR2StorageMetrics → data.viewer.accounts[0].r2StorageAdaptiveGroups).
    // The stand-in keeps no objects, so a known bucket has no metrics yet; any other query is refused.
    ["POST", "/graphql", (c) => {
      const { operationName, variables } = c.json();
      if (operationName !== "getR2StorageMetrics") throw bad(10000, `the stand-in answers only getR2StorageMetrics (asked: ${operationName})`);
      if (variables?.accountTag !== state.accountId) throw new ApiError(403, 10000, "Authentication error: not your account");
      bucketOf(variables?.filter?.bucketName);
      return { __graphql: { data: { viewer: { accounts: [{ r2StorageAdaptiveGroups: [] }] } }, errors: null } };
    }],
    // Hyperdrive (wrangler src/hyperdrive/client.ts: createConfig, listConfigs).
    ["GET", `${A}/hyperdrive/configs`, (c) => paged([...state.hyperdrive.values()].map(redactOrigin), c.query)],
    ["POST", `${A}/hyperdrive/configs`, (c) => {
      const body = c.json();
      if (!body.name || !body.origin?.host) throw bad(2001, "name and origin are required");
      if ([...state.hyperdrive.values()].some((h) => h.name === body.name)) throw bad(2017, `A Hyperdrive config with the name "${body.name}" already exists`);
      const config = { id: hex(16), name: body.name, origin: body.origin, caching: body.caching ?? { disabled: false }, created_on: now() };
      state.hyperdrive.set(config.id, config);
      return redactOrigin(config);
    }],
    ["GET", `${A}/hyperdrive/configs/([0-9a-f]+)`, (c, _a, id) => {
      const h = state.hyperdrive.get(id);
      if (!h) throw notFound(2005, "Hyperdrive config not found");
      return redactOrigin(h);
    }],
    // Workers (wrangler src/deploy/deploy.ts and src/versions/: the service, the script's
    // settings and deployments, the upload, versions and deployments, subdomain, schedules).
    ["GET", `${A}/workers/services/([^/]+)`, (c, _a, name) => {
      const s = state.scripts.get(name);
      if (!s) throw notFound(10090, "This Worker does not exist on your account.");
      return { id: name, default_environment: { environment: "production", created_on: s.created_on, modified_on: s.modified_on, script: { id: name, tag: s.tag, etag: s.etag, handlers: ["fetch"], last_deployed_from: "wrangler", migration_tag: s.migrationTag } }, created_on: s.created_on, modified_on: s.modified_on };
    }],
    ["GET", `${A}/workers/scripts`, () => [...state.scripts.values()].map((s) => ({ id: s.name, tag: s.tag, etag: s.etag, created_on: s.created_on, modified_on: s.modified_on, usage_model: "standard", handlers: ["fetch"], migration_tag: s.migrationTag }))],
    ["GET", `${A}/workers/scripts/([^/]+)/settings`, (c, _a, name) => settingsOf(script(name))],
    ["PATCH", `${A}/workers/scripts/([^/]+)/script-settings`, (c, _a, name) => ({ ...settingsOf(script(name)), ...c.json() })],
    ["GET", `${A}/workers/scripts/([^/]+)/deployments`, (c, _a, name) => ({ deployments: script(name).deployments })],
    ["PUT", `${A}/workers/scripts/([^/]+)`, async (c, _a, name) => {
      const { metadata, parts } = await c.multipart();
      const s = state.scripts.get(name) ?? newScript(name);
      const version = applyUpload(state, s, metadata, parts);
      const deployment = { id: uuid(), created_on: now(), source: "wrangler", strategy: "percentage", versions: [{ version_id: version.id, percentage: 100 }] };
      s.deployments.push(deployment);
      state.scripts.set(name, s);
      return { id: name, etag: s.etag, tag: s.tag, deployment_id: deployment.id, created_on: s.created_on, modified_on: s.modified_on, handlers: ["fetch"], usage_model: "standard", compatibility_date: s.compatibility_date, placement: s.placement, startup_time_ms: 1 };
    }],
    ["POST", `${A}/workers/scripts/([^/]+)/versions`, async (c, _a, name) => {
      const { metadata, parts } = await c.multipart();
      const s = script(name);
      const version = applyUpload(state, s, metadata, parts);
      return { id: version.id, number: version.number, metadata: version.metadata, resources: { bindings: s.bindings, script: { etag: s.etag, handlers: ["fetch"] } }, startup_time_ms: 1 };
    }],
    ["POST", `${A}/workers/scripts/([^/]+)/deployments`, (c, _a, name) => {
      const s = script(name);
      const body = c.json();
      for (const v of body.versions ?? []) if (!s.versions.some((x) => x.id === v.version_id)) throw bad(10155, `version ${v.version_id} not found`);
      const deployment = { id: uuid(), created_on: now(), source: "wrangler", strategy: body.strategy ?? "percentage", versions: body.versions ?? [] };
      s.deployments.push(deployment);
      return deployment;
    }],
    ["GET", `${A}/workers/scripts/([^/]+)/subdomain`, (c, _a, name) => script(name).subdomain],
    // The Worker resource (wrangler >= 4.1xx reads a worker's workers.dev state here before the
    // subdomain POST: src/routes.ts getWorkerSubdomain → worker.subdomain; api-schemas workers-worker).
    ["GET", `${A}/workers/workers/([^/]+)`, (c, _a, name) => {
      const s = script(name);
      return { id: s.name, name: s.name, created_on: s.created_on, updated_on: s.modified_on, logpush: false, observability: null, tags: [], tail_consumers: [], subdomain: { ...s.subdomain } };
    }],
    ["POST", `${A}/workers/scripts/([^/]+)/subdomain`, (c, _a, name) => {
      const s = script(name);
      const body = c.json();
      s.subdomain = { enabled: Boolean(body.enabled), previews_enabled: Boolean(body.previews_enabled ?? body.enabled) };
      return s.subdomain;
    }],
    ["GET", `${A}/workers/scripts/([^/]+)/schedules`, (c, _a, name) => ({ schedules: script(name).schedules })],
    ["PUT", `${A}/workers/scripts/([^/]+)/schedules`, (c, _a, name) => {
      const s = script(name);
      s.schedules = (c.json() ?? []).map((x) => ({ cron: x.cron, created_on: now(), modified_on: now() }));
      return { schedules: s.schedules };
    }],
    // Secrets (wrangler src/secret/index.ts: PUT …/secrets with {name, text, type}).
    ["GET", `${A}/workers/scripts/([^/]+)/secrets`, (c, _a, name) => [...script(name).secrets.keys()].map((n) => ({ name: n, type: "secret_text" }))],
    ["PUT", `${A}/workers/scripts/([^/]+)/secrets`, (c, _a, name) => {
      const s = script(name);
      const body = c.json();
      if (!body.name || typeof body.text !== "string") throw bad(10021, "a secret needs a name and a text");
      s.secrets.set(body.name, body.text);
      return { name: body.name, type: "secret_text" };
    }],
    ["DELETE", `${A}/workers/scripts/([^/]+)/secrets/([^/]+)`, (c, _a, name, secret) => {
      const s = script(name);
      if (!s.secrets.delete(decodeURIComponent(secret))) throw notFound(10056, `secret ${secret} not found`);
      return null;
    }],
  ];
}

/** A lifecycle configuration as Cloudflare takes it: each rule an `id` (unique), `enabled`,
 * `conditions.prefix`, and conditions of `type` "Age" (`maxAge`, seconds) or "Date" (`date`). */
function checkLifecycleRules(rules) {
  if (!Array.isArray(rules)) throw bad(10040, "rules must be an array");
  const ids = new Set();
  for (const rule of rules) {
    if (typeof rule?.id !== "string" || !rule.id) throw bad(10040, "a lifecycle rule needs an id");
    if (ids.has(rule.id)) throw bad(10040, `lifecycle rule id ${rule.id} is not unique`);
    ids.add(rule.id);
    if (typeof rule.enabled !== "boolean") throw bad(10040, `lifecycle rule ${rule.id}: enabled must be a boolean`);
    if (typeof rule.conditions !== "object" || rule.conditions === null) throw bad(10040, `lifecycle rule ${rule.id}: conditions are required`);
    const transitions = [rule.deleteObjectsTransition, rule.abortMultipartUploadsTransition, ...(rule.storageClassTransitions ?? [])].filter(Boolean);
    for (const { condition } of transitions) {
      const ok = condition?.type === "Age" ? Number.isInteger(condition.maxAge) && condition.maxAge > 0 : condition?.type === "Date" && !Number.isNaN(Date.parse(condition.date));
      if (!ok) throw bad(10040, `lifecycle rule ${rule.id}: a condition is {type: "Age", maxAge} or {type: "Date", date}`);
    }
  }
  return rules;
}

function redactOrigin(h) {
  const { password, ...origin } = h.origin ?? {};
  return { ...h, origin };
}

/**
 * Starts the stand-in on a free loopback port. `token` is the only API token it accepts;
 * `accountId` the only account. `failOn(method, pathRegex, { times, status, code, message })`
 * makes the next matching requests fail as Cloudflare would (an injected error); with
 * `{ hang: true }` they are never answered (an API that does not answer). `subdomain: null`: an
 * account without a workers.dev subdomain. `serveWorkers(script => origin)`: where the front
 * door sends a deployed worker's workers.dev requests (`frontDoor` records them).
 */
export async function startCfApi({ token = "standin-api-token-0123456789", accountId = hex(16), subdomain = "standin", port = 0 } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-cf-api-"));
  const state = newState(accountId, subdomain, dir);
  const table = routes(state).map(([method, pattern, handler]) => [method, new RegExp(`^/client/v4${pattern}$`), handler]);
  const requests = [];
  const faults = [];
  const frontDoor = [];
  let workerOrigin = null;
  const server = http.createServer(async (req, res) => {
    if (req.headers["x-forwarded-host"]) return workersDev(req, res);
    const url = new URL(req.url, "http://x");
    const record = { method: req.method, path: url.pathname.replace(/^\/client\/v4/, ""), query: url.search, status: 0, at: Date.now() };
    requests.push(record);
    const send = (status, payload) => {
      record.status = status;
      const body = JSON.stringify(payload);
      res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
      res.end(body);
    };
    try {
      const body = await readBody(req);
      if (req.headers.authorization !== `Bearer ${token}`) throw new ApiError(401, 10000, "Authentication error");
      const fault = faults.find((f) => f.method === req.method && f.path.test(record.path) && f.times > 0);
      if (fault) {
        fault.times--;
        if (fault.hang) {
          record.status = "hung";
          return; // never answered: the connection stays open until close()
        }
        throw new ApiError(fault.status, fault.code, fault.message);
      }
      const route = table.find(([m, re]) => m === req.method && re.test(url.pathname));
      if (!route) throw notFound(7003, `Could not route to ${url.pathname}, perhaps your object identifier is invalid? (not in the stand-in)`);
      const groups = url.pathname.match(route[1]).slice(1).map(decodeURIComponent);
      if (groups.length && route[1].source.includes("/accounts/([^/]+)") && groups[0] !== state.accountId) throw new ApiError(403, 10000, "Authentication error: not your account");
      const ctx = {
        query: url.searchParams,
        json: () => {
          if (!body.length) return {};
          try {
            return JSON.parse(body.toString("utf8"));
          } catch {
            throw bad(10026, "the body is not JSON");
          }
        },
        multipart: async () => {
          const m = await multipart(req, body);
          record.metadata = m.metadata;
          record.modules = Object.keys(m.parts).filter((p) => p !== "metadata");
          return m;
        },
      };
      if (req.headers["content-type"]?.startsWith("application/json") && body.length) record.body = ctx.json();
      const out = await route[2](ctx, ...groups);
      if (out && typeof out === "object" && "__graphql" in out) send(200, out.__graphql);
      else if (out && typeof out === "object" && "resultInfo" in out && "result" in out) send(200, envelope(out.result, out.resultInfo));
      else send(200, envelope(out ?? null));
    } catch (e) {
      const status = e instanceof ApiError ? e.status : 500;
      const code = e instanceof ApiError ? e.code : 10002;
      send(status, { success: false, errors: [{ code, message: e.message }], messages: [], result: null });
    }
  });
  /** `<script>.<subdomain>.workers.dev`: the deployed script's worker, as Cloudflare's front
   * door serves it — 404 when it is not deployed or its workers.dev route is off. */
  async function workersDev(req, res) {
    const host = String(req.headers["x-forwarded-host"]).toLowerCase();
    const record = { method: req.method, host, path: req.url, status: 0 };
    frontDoor.push(record);
    const answer = (status, text) => {
      record.status = status;
      res.writeHead(status, { "content-type": "text/plain" });
      res.end(text);
    };
    const m = state.subdomain ? host.match(new RegExp(`^([a-z0-9-]+)\\.${state.subdomain}\\.workers\\.dev$`)) : null;
    const script = m && state.scripts.get(m[1]);
    if (!script || !script.subdomain.enabled) return answer(404, "There is nothing here yet");
    try {
      const origin = workerOrigin ? await workerOrigin(script) : null;
      if (!origin) return answer(503, `the stand-in serves no worker for ${script.name}`);
      const body = await readBody(req);
      const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => !["host", "x-forwarded-host", "connection", "content-length"].includes(k)));
      const r = await fetch(`${origin}${req.url}`, { method: req.method, headers, body: body.length ? body : undefined });
      const out = Buffer.from(await r.arrayBuffer());
      record.status = r.status;
      res.writeHead(r.status, { "content-type": r.headers.get("content-type") ?? "application/octet-stream", "content-length": out.length });
      res.end(out);
    } catch (e) {
      answer(502, `the stand-in could not reach the worker: ${e.message}`);
    }
  }
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${server.address().port}`;
  const url = `${origin}/client/v4`;
  return {
    url,
    token,
    accountId,
    state,
    requests,
    frontDoor,
    /** The workers.dev front door's address (KVBENCH_WORKERS_DEV_VIA of scripts/check-deploy.mjs). */
    origin,
    serveWorkers(fn) {
      workerOrigin = fn;
    },
    /** The environment that points wrangler at the stand-in, non-interactively. */
    env: { CLOUDFLARE_API_BASE_URL: url, CLOUDFLARE_API_TOKEN: token, CLOUDFLARE_ACCOUNT_ID: accountId, WRANGLER_SEND_METRICS: "false" },
    failOn(method, pathPattern, { times = 1, status = 500, code = 10013, message = "An unknown error has occurred (injected by the stand-in)", hang = false } = {}) {
      faults.push({ method, path: pathPattern, times, status, code, message, hang });
    },
    clearFaults() {
      faults.length = 0;
    },
    async close() {
      server.closeAllConnections?.();
      await new Promise((resolve) => server.close(resolve));
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const i = process.argv.indexOf("--port");
  const api = await startCfApi({ port: i > 0 ? Number(process.argv[i + 1]) : 0 });
  for (const [k, v] of Object.entries(api.env)) console.log(`export ${k}=${v}`);
  process.on("SIGINT", async () => {
    await api.close();
    process.exit(0);
  });
  process.on("exit", () => {
    for (const r of api.requests) console.error(`${r.status} ${r.method} ${r.path}${r.query}`);
  });
}
