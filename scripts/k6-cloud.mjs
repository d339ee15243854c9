#!/usr/bin/env node
// The published k6 profiles on Grafana Cloud k6, priced before they run.
//
//   node scripts/k6-cloud.mjs plan [PROFILE...] [--quota VUH] [--json] [-e K=V ...]
//   node scripts/k6-cloud.mjs run PROFILE [--quota VUH] [-e K=V ...] [-- more k6 cloud run flags]
//
// `plan` asks k6 itself (`k6 inspect --execution-requirements k6/kvbench.js`, the script not run)
// for each profile's reserved VUs and duration (default: regions and single) and prints
// VU-hours as Grafana Cloud k6 bills an arrival-rate test, maxVUs × minutes / 60: on the
// scenario's duration, and on k6's total duration (gracefulStop included, the most a run can
// last) — the latter is compared with the quota (--quota or KVBENCH_QUOTA_VUH, default 500, the
// free tier's month). Exit 1 when a profile does not fit. `-e` passes the script's knobs
// (KVBENCH_ANSWER_MS, KVBENCH_VU_MARGIN, KVBENCH_MAX_VUS, ...), as to k6.
// `run` plans PROFILE, refuses it over the quota (exit 2, nothing sent to the cloud), then runs
// `k6 cloud run` (k6 2.x: the stack from K6_CLOUD_STACK_ID or `k6 cloud login`, the token from
// K6_CLOUD_TOKEN; neither printed here). k6's exit code is this command's: 97 (the cloud aborted
// the run, not for a threshold) and 99 (a threshold crossed) are failed runs like any non-zero.
// k6: K6_BIN, else .tools/k6/bin/k6 (npm run setup), else `k6` on PATH.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const SCRIPT = path.join(ROOT, "k6/kvbench.js");
const LOCAL_K6 = path.join(ROOT, ".tools/k6/bin/k6");
const K6 = process.env.K6_BIN || (fs.existsSync(LOCAL_K6) ? LOCAL_K6 : "k6");
const PLACEHOLDER_URL = "https://worker.invalid/test";

function fail(code, msg) {
  process.stderr.write(`k6-cloud: ${msg}\n`);
  process.exit(code);
}

/** Seconds in a Go duration as k6 prints it ("31m0s", "1h0m0s", "1.5s", "250ms"). */
export function goSeconds(text) {
  const unit = { h: 3600, m: 60, s: 1, ms: 1e-3, us: 1e-6, "µs": 1e-6, ns: 1e-9 };
  const re = /([0-9.]+)(h|ms|m|s|us|µs|ns)/gy;
  let total = 0;
  let at = 0;
  for (let m; (m = re.exec(text)) !== null; at = re.lastIndex) total += Number(m[1]) * unit[m[2]];
  if (at === 0 || at !== text.length) throw new Error(`not a duration: ${JSON.stringify(text)}`);
  return total;
}

/** One profile's figures from `k6 inspect --execution-requirements` output. */
export function priced(profile, inspect) {
  const sc = inspect.scenarios?.kvbench;
  if (!sc || !(inspect.maxVUs > 0)) throw new Error(`k6 inspect gave no kvbench scenario for ${profile}`);
  const minutes = goSeconds(sc.duration) / 60;
  const totalMinutes = goSeconds(inspect.totalDuration) / 60;
  return {
    profile,
    rate: sc.rate,
    duration_min: minutes,
    pre_allocated_vus: sc.preAllocatedVUs,
    max_vus: inspect.maxVUs,
    vuh: (inspect.maxVUs * minutes) / 60,
    vuh_at_most: (inspect.maxVUs * totalMinutes) / 60,
  };
}

function inspect(profile, env) {
  const url = env.find((e) => e.startsWith("KVBENCH_URL=")) ? [] : [`KVBENCH_URL=${PLACEHOLDER_URL}`];
  const args = ["inspect", "--execution-requirements"];
  for (const e of [...url, ...env, `KVBENCH_PROFILE=${profile}`]) args.push("-e", e);
  args.push(SCRIPT);
  const r = spawnSync(K6, args, { encoding: "utf8", timeout: 60_000, maxBuffer: 4 << 20 });
  if (r.error) fail(3, `cannot run ${K6}: ${r.error.message} (npm run setup, or set K6_BIN)`);
  if (r.status !== 0) fail(3, `k6 inspect (${profile}) exited ${r.status}:\n${r.stderr.slice(-2000)}`);
  return priced(profile, JSON.parse(r.stdout));
}

function parseArgs(argv) {
  const o = { positional: [], env: [], quota: Number(process.env.KVBENCH_QUOTA_VUH || 500), json: false, rest: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--") {
      o.rest = argv.slice(i + 1);
      break;
    }
    if (a === "-e" || a === "--env") {
      const v = argv[++i];
      if (!v || !v.includes("=")) fail(2, `${a} needs K=V`);
      o.env.push(v);
    } else if (a === "--quota") o.quota = Number(argv[++i]);
    else if (a === "--json") o.json = true;
    else if (a.startsWith("-")) fail(2, `unknown flag ${a}`);
    else o.positional.push(a);
  }
  if (!(o.quota > 0)) fail(2, "the quota (--quota or KVBENCH_QUOTA_VUH) must be a number of VU-hours above 0");
  return o;
}

const fmt = (x) => (Math.round(x * 10) / 10).toFixed(1);

function printPlan(rows, quota) {
  const head = ["profile", "req/s", "min", "preAllocatedVUs", "maxVUs", "VUh", "VUh at most", `fits ${quota} VUh`];
  const lines = rows.map((r) => [r.profile, r.rate, fmt(r.duration_min), r.pre_allocated_vus, r.max_vus, fmt(r.vuh), fmt(r.vuh_at_most), r.fits ? "yes" : "NO"].map(String));
  const w = head.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)));
  for (const l of [head, ...lines]) console.log(l.map((c, i) => c.padEnd(w[i])).join("  ").trimEnd());
  const sum = rows.reduce((s, r) => s + r.vuh_at_most, 0);
  console.log(`all ${rows.length} together: at most ${fmt(sum)} VUh, ${sum <= quota ? "within" : "over"} ${quota} VUh`);
  console.log("VUh = maxVUs x minutes / 60 (Grafana Cloud k6, arrival-rate executors); 'at most' includes gracefulStop");
}

const [cmd, ...argv] = process.argv.slice(2);
const opts = parseArgs(argv);
if (cmd === "plan") {
  const profiles = opts.positional.length ? opts.positional : ["regions", "single"];
  const rows = profiles.map((p) => ({ ...inspect(p, opts.env), quota: opts.quota }));
  for (const r of rows) r.fits = r.vuh_at_most <= opts.quota;
  if (opts.json) console.log(JSON.stringify(rows));
  else printPlan(rows, opts.quota);
  process.exit(rows.every((r) => r.fits) ? 0 : 1);
} else if (cmd === "run") {
  if (opts.positional.length !== 1) fail(2, "run takes one profile: regions or single");
  const [profile] = opts.positional;
  const row = inspect(profile, opts.env);
  row.fits = row.vuh_at_most <= opts.quota;
  printPlan([row], opts.quota);
  if (!row.fits) fail(2, `${profile} may use ${fmt(row.vuh_at_most)} VUh, over the quota of ${opts.quota}: not started (lower KVBENCH_ANSWER_MS or KVBENCH_VU_MARGIN, or raise --quota)`);
  if (!process.env.K6_CLOUD_STACK_ID) process.stderr.write("k6-cloud: K6_CLOUD_STACK_ID is not set; k6 2.x then needs the stack from `k6 cloud login`\n");
  const args = ["cloud", "run"];
  for (const e of [...opts.env, `KVBENCH_PROFILE=${profile}`]) args.push("-e", e);
  args.push(...opts.rest, SCRIPT);
  const child = spawn(K6, args, { stdio: "inherit" });
  child.on("error", (e) => fail(3, `cannot run ${K6}: ${e.message}`));
  child.on("exit", (code, sig) => {
    if (code === 0) process.exit(0);
    const why = code === 97 ? "the cloud aborted the run (not a threshold)" : code === 99 ? "a threshold was crossed" : `exit ${code ?? sig}`;
    fail(code || 1, `k6 cloud run failed: ${why}; the run is not a result`);
  });
} else {
  fail(2, "usage: k6-cloud.mjs plan [PROFILE...] [--quota VUH] [--json] [-e K=V ...] | run PROFILE [--quota VUH] [-e K=V ...] [-- k6 flags]");
}
