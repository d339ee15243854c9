#!/usr/bin/env node
// The first look at a deployed (or local) worker, run by `npm run deploy` after deploying: `/`
// says which stores are configured and, for each that is not, why (a missing secret, workers.dev
// for the Cache API); one `/test` shows what each configured store answered; `/probes` shows the
// probes; and each fleet member is called by the worker itself (`POST /probes/check`, the way
// its probe calls it), waiting (bounded: KVBENCH_MEMBER_WAIT_S, 180 s by default) for every
// member to answer from its region. It fails (exit 1) when the worker is broken — `/` or `/test`
// not answering, a configured store failing — or when a member is unreachable (its status and
// body; Cloudflare's error 1042 named), not placed, or placed outside its region's metro, each
// named. Any route it calls answering other than 200 fails it too (a 401/403 only when no token
// was given: that part is then skipped, and said). A store without its secrets is reported, never
// a failure.
// Usage: node scripts/check-deploy.mjs URL   (BENCH_TOKEN from the environment when the worker
// has one; it is sent as a header and never printed).
// KVBENCH_WORKERS_DEV_VIA=http://host:port: a workers.dev URL is reached through that front door
// (its host sent as X-Forwarded-Host) — how the deploy test reaches the URL its deploy printed
// through the Cloudflare API stand-in, which serves each deployed worker's workers.dev host.
const base = (process.argv[2] ?? "").replace(/\/+$/, "");
if (!/^https?:\/\/[^/]+$/.test(base)) {
  console.error("usage: node scripts/check-deploy.mjs https://kvbench.<you>.workers.dev");
  process.exit(2);
}
const token = (process.env.BENCH_TOKEN ?? "").trim();
const headers = token ? { Authorization: `Bearer ${token}` } : {};
const problems = [];

const memberWaitS = Number(process.env.KVBENCH_MEMBER_WAIT_S ?? 180);
if (!Number.isFinite(memberWaitS) || memberWaitS < 0 || memberWaitS > 3600) {
  console.error(`KVBENCH_MEMBER_WAIT_S: expected 0 to 3600 seconds, got ${JSON.stringify(process.env.KVBENCH_MEMBER_WAIT_S)}`);
  process.exit(2);
}
// Seconds between two looks at the members that are not ready yet.
const memberLookS = Math.max(1, Number(process.env.KVBENCH_MEMBER_LOOK_S ?? 15) || 15);

const via = (process.env.KVBENCH_WORKERS_DEV_VIA ?? "").replace(/\/+$/, "");
const host = new URL(base).host;
const target = via && host.endsWith(".workers.dev") ? via : base;

async function get(path, { auth = false, method = "GET" } = {}) {
  try {
    const sent = { ...(auth ? headers : {}), ...(target !== base ? { "x-forwarded-host": host } : {}) };
    const res = await fetch(`${target}${path}`, { method, headers: sent, signal: AbortSignal.timeout(120_000) });
    const text = await res.text();
    let json = null;
    try {
      json = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    return { status: res.status, json, text };
  } catch (e) {
    return { status: 0, json: null, text: String(e?.message ?? e) };
  }
}

const short = (s, n = 100) => {
  const t = String(s ?? "").replace(/\s+/g, " ");
  return t.length > n ? `${t.slice(0, n - 1)}…` : t;
};

const index = await get("/");
if (index.status !== 200 || !index.json?.stores) {
  console.error(`✗ GET ${base}/ answered ${index.status}: ${short(index.text, 300)}`);
  process.exit(1);
}
console.log(`worker ${base} (${index.json.name} ${index.json.version})`);
console.log("\nstores (GET /):");
const configured = [];
for (const [name, s] of Object.entries(index.json.stores)) {
  if (s.configured) configured.push(name);
  console.log(`  ${s.configured ? "✓" : "–"} ${name.padEnd(8)} ${s.configured ? "configured" : `not configured: ${short(s.not_configured)}`}`);
}
const auth = index.json.auth ?? {};
if (auth.error) problems.push(auth.error);

const test = await get("/test", { auth: true });
console.log("\none /test:");
if (test.status === 401 && !token) {
  console.log("  skipped: the worker has a BENCH_TOKEN; export BENCH_TOKEN=... and rerun to check /test");
} else if (test.status !== 200 || !test.json?.stores) {
  problems.push(`/test answered ${test.status}: ${short(test.text, 300)}`);
} else {
  for (const [name, r] of Object.entries(test.json.stores)) {
    if (r.error?.kind === "not_configured") continue;
    if (r.error) {
      problems.push(`${name}: ${r.error.kind} on ${r.error.op}: ${short(r.error.message)}`);
      console.log(`  ✗ ${name.padEnd(8)} ${r.error.kind} (${r.error.op}): ${short(r.error.message)}`);
    } else {
      const what = r.hit ? "hit" : `miss, wrote ${r.value_bytes} B in ${r.write_ms} ms`;
      console.log(`  ✓ ${name.padEnd(8)} read ${r.read_ms} ms, ${what}${r.connect_ms != null ? `, connect ${r.connect_ms} ms` : ""}`);
    }
  }
  console.log(`  colo ${test.json.colo}`);
}

const probes = await get("/probes", { auth: true });
console.log("\nprobes (GET /probes):");
if (probes.status === 200 && probes.json?.probes) {
  const p = probes.json;
  const running = p.probes.filter((x) => x.running).length;
  const hints = p.probes.filter((x) => x.vantage !== "member").length;
  const members = p.probes.filter((x) => x.vantage === "member");
  console.log(`  ${hints} hints, ${members.length} fleet members, every ${p.every_s} s, ${running} running (the cron starts them within 5 minutes; POST /probes/stop stops them)`);
  for (const m of members) {
    const where = m.region ? ` (expected ${m.region.metro}, ${m.region.colo})` : "";
    console.log(`    ${m.label}${where}: ${m.last_error ? `last error: ${short(m.last_error)}` : `${m.kept ?? 0} answers kept`}`);
  }
  if (p.bill?.monthly_usd != null) console.log(`  projected bill: $${p.bill.monthly_usd} a month`);
} else if ((probes.status === 401 || probes.status === 403) && !token) {
  console.log("  skipped: behind BENCH_TOKEN");
} else {
  problems.push(`GET /probes answered ${probes.status}: ${short(probes.text, 300)}`);
  console.log(`  ✗ GET /probes answered ${probes.status}: ${short(probes.text)}`);
}

// Each member called by the worker, as its probe calls it: until every one answers from its
// region, or the wait is over. A member placed a moment after its deploy answers unplaced first.
const memberCount = probes.json?.probes?.filter((x) => x.vantage === "member" && !x.outside).length ?? 0;
if (memberCount > 0) {
  console.log(`\nfleet members (POST /probes/check, waiting up to ${memberWaitS} s for each to answer from its region):`);
  const deadline = Date.now() + memberWaitS * 1000;
  const last = new Map();
  let pending = null;
  for (let look = 1; ; look++) {
    const q = pending ? `?members=${encodeURIComponent(pending.join(","))}` : "";
    const r = await get(`/probes/check${q}`, { auth: true, method: "POST" });
    if (r.status !== 200 || !Array.isArray(r.json?.members)) {
      if ((r.status === 401 || r.status === 403) && !token) {
        console.log("  skipped: behind BENCH_TOKEN (export BENCH_TOKEN=... and rerun to check the members)");
      } else {
        problems.push(`POST /probes/check answered ${r.status}: ${short(r.text, 300)}`);
      }
      break;
    }
    for (const m of r.json.members) last.set(m.label, m);
    pending = [...last.values()].filter((m) => m.problem).map((m) => m.label);
    if (pending.length === 0 || Date.now() + memberLookS * 1000 > deadline) break;
    console.log(`  look ${look}: ${last.size - pending.length} of ${last.size} ready; again in ${memberLookS} s for ${pending.length}: ${short(pending.join(", "), 200)}`);
    await new Promise((ok) => setTimeout(ok, memberLookS * 1000));
  }
  for (const m of last.values()) {
    if (m.problem) {
      problems.push(`member ${m.label}: ${short(m.problem, 400)}`);
      console.log(`  ✗ ${m.label}: ${short(m.problem, 300)}`);
    } else {
      console.log(`  ✓ ${m.label}: ${m.placement ?? "placed"} (${m.colo}), handler ${m.handler_ms} ms, call ${m.call_ms} ms`);
    }
  }
}

if (problems.length) {
  console.error(`\n✗ ${problems.length} problem(s):`);
  for (const p of problems) console.error(`  - ${p}`);
  process.exit(1);
}
console.log(`\n✓ ${configured.length} store(s) configured and answering; report: ${base}/report`);
