// Serves the built worker (build/index.js) over HTTP with Miniflare: local KV, Durable Objects,
// D1 (migrated) and R2 in memory, the Cache API, the variables of wrangler.toml's [vars], plus a
// dotenv file (--env-file) for the local services. It serves what those say, as a deployment
// would: without BENCH_TOKEN or BENCH_OPEN=true in them, /test is closed (403); the local stack's
// env file has BENCH_OPEN (scripts/dev.sh, scripts/bench.sh, and each fleet member's
// start_member in scripts/stack.sh).
// --member serves a fleet member's build instead (build-member/: /, /healthz and /test, the `do`
// store's and the run archive's classes from the main build beside it, as deployed).
// Usage: node scripts/serve-worker.mjs --port 8787 [--env-file FILE] [--member]
import fs from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { ROOT, applyMigrations, newMiniflare, stackOptions, tomlVars } from "./worker-options.mjs";
const { values } = parseArgs({
  options: {
    port: { type: "string", default: "8787" },
    "env-file": { type: "string" },
    member: { type: "boolean", default: false },
    // More members in this Miniflare (PORT:ENV_FILE each), sharing the first member's stores.
    "also": { type: "string", multiple: true, default: [] },
  },
});
const port = Number(values.port);
if (!Number.isInteger(port) || port < 1 || port > 65535) {
  console.error(`--port: expected a TCP port, got ${values.port}`);
  process.exit(2);
}

function dotenv(file) {
  const vars = {};
  if (!file) return vars;
  for (const line of fs.readFileSync(file, "utf8").split("\n")) {
    const m = line.match(/^\s*([A-Za-z0-9_]+)\s*=\s*(.*)\s*$/);
    if (m) vars[m[1]] = m[2];
  }
  return vars;
}

// Two Miniflare layers are left out because each is a JavaScript worker on workerd's single
// thread that a deployed worker does not have, and the benchmark would time them:
// - `stripCfConnectingIp: false`: otherwise every outbound `fetch` (the Upstash and Deno KV calls)
//   is routed through an extra worker that copies its headers and re-issues it (measured at
//   200 req/s: ~10% of a core, fetch read p99 11-13 ms instead of 6-7 ms);
// - `unsafeDirectSockets`: requests reach the worker directly instead of through Miniflare's entry
//   worker (a further ~4% of a core). Without that entry worker there is no placeholder
//   `request.cf`, so answers say `"colo": "local"`. Miniflare's own entry socket still listens, on
//   a random loopback port.
// With the report worker behind GET /report, as deployed (a member has no /report).
const vars = (file) => ({ ...tomlVars(path.join(ROOT, "wrangler.toml")), ...dotenv(file) });
const others = values.also.map((spec) => {
  const [p, file] = spec.split(":");
  if (!values.member || !Number.isInteger(Number(p)) || !file) {
    console.error(`--also: expected PORT:ENV_FILE beside --member, got ${spec}`);
    process.exit(2);
  }
  return { bindings: vars(file), own: { unsafeDirectSockets: [{ host: "127.0.0.1", port: Number(p) }], stripCfConnectingIp: false } };
});
const mf = newMiniflare(
  stackOptions(
    vars(values["env-file"]),
    {
      host: "127.0.0.1",
      port: 0,
      unsafeDirectSockets: [{ host: "127.0.0.1", port }],
      stripCfConnectingIp: false,
    },
    { member: values.member, others },
  ),
);
await mf.ready;
await applyMigrations(mf);
const url = await mf.unsafeGetDirectURL();
console.log(`worker listening on ${url}`);
const stop = async () => {
  await mf.dispose();
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
