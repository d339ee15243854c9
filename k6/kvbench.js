// k6 script for the kvbench worker: an open-loop (constant-arrival-rate) load against /test that
// records the worker's own timings as k6 metrics, so one k6 run (local, k6-operator, or Grafana
// Cloud k6 load zones) gives both k6's dashboards and, through `kvbench import k6`, the same
// report.json / report.html / charts as `kvbench run`. Valid under k6 1.x and 2.x (run here with
// 1.1.0; 2.3's commands read from Grafana's documentation, not run).
//
//   k6 run -e KVBENCH_URL=https://<worker>/test -e KVBENCH_RATE=10 -e KVBENCH_DURATION=30m \
//          --out json=results.json.gz k6/kvbench.js
//   kvbench import k6 results.json.gz --out report-dir
//
// On Grafana Cloud k6 (k6 2.x: every `k6 cloud` command needs a stack, `k6 login` is gone):
//   node scripts/k6-cloud.mjs plan                 # VUs and VU-hours of both profiles, quota check
//   K6_CLOUD_TOKEN=... K6_CLOUD_STACK_ID=... node scripts/k6-cloud.mjs run regions -e KVBENCH_URL=...
// (`run` prices the profile first, refuses it over the quota, then runs `k6 cloud run`; exit 97, a
// cloud run aborted for a reason other than a threshold, is a failed run like any non-zero exit.)
//
// Variables (k6 -e): KVBENCH_URL (required, the full /test URL), KVBENCH_RATE (requests/s,
// default 10), KVBENCH_DURATION (k6 duration, default 30m), KVBENCH_TOKEN (optional bearer for
// BENCH_TOKEN), KVBENCH_QUERY (optional extra query, e.g. "stores=kv,upstash&ttl=60").
// VUs, by Little's law (the requests in flight = arrival rate × the time an answer takes):
// maxVUs = ceil(rate × KVBENCH_ANSWER_MS / 1000 × KVBENCH_VU_MARGIN), where KVBENCH_ANSWER_MS is
// the answer time you expect the p99.9 to stay under (default 2000) and KVBENCH_VU_MARGIN the
// headroom over it (default 1.25); KVBENCH_MAX_VUS sets maxVUs outright, KVBENCH_VUS the
// pre-allocated ones (default a quarter of maxVUs; k6 starts the rest when needed). Grafana Cloud
// k6 bills an arrival-rate test maxVUs × minutes / 60 VU-hours, so these knobs are its price. A
// request that finds no free VU (answers slower than the bound) is not delayed but counted by k6's
// `dropped_iterations`, which kvbench reports as `not_sent` (open loop, like `kvbench run`).
// KVBENCH_PROFILE picks ready-made options: `regions` (the published 20 load zones × 10 req/s ×
// 30 min) or `single` (one load zone × 400 req/s × 10 min); both for `k6 cloud run`.
// KVBENCH_TIMEOUT (a k6 duration, e.g. 90s) overrides the request timeout, which is otherwise the
// worker's worst case for the URL (below; k6's own default of 60 s would cut answers the worker
// still gives). KVBENCH_E2E picks what `kvbench_request_ms` (the end-to-end time) is: `duration`
// (default) is k6's http_req_duration — sending + waiting + receiving, so the time spent waiting
// for a free connection (blocked), connecting and in the TLS handshake is left out; `total` adds
// http_req_blocked, http_req_connecting and http_req_tls_handshaking. Both are recorded in
// `kvbench_config` (tags timeout, e2e), and `kvbench import k6` reports which one it read.
//
// The contract with `kvbench import k6` (crates/cli/src/import.rs): every sample of an iteration
// carries the metadata `kvbench_req`; per store in the answer, `kvbench_store_value_bytes`
// (always, it marks the store present), `kvbench_store_read_ms` (tag result = hit|miss|unknown|
// error), `kvbench_store_write_ms` (result = ok|error), `kvbench_store_connect_ms`,
// `kvbench_store_errors` (kind, op); then, last, `kvbench_request_ms` (k6's http_req_duration, or
// with KVBENCH_E2E=total that plus blocked, connecting and TLS handshaking; tags outcome = ok|http_<status>|malformed|timeout|connect|transport, colo, detail, and
// cold = true on the first answer of an isolate, `isolate_requests` 1).
// A malformed or non-200 answer is counted, never throws.

import http from 'k6/http';
import exec from 'k6/execution';
import { Counter, Trend, Gauge } from 'k6/metrics';

const URL_BASE = __ENV.KVBENCH_URL;
const RATE = Number(__ENV.KVBENCH_RATE || 10);
const DURATION = __ENV.KVBENCH_DURATION || '30m';
const QUERY = __ENV.KVBENCH_QUERY || '';
const TOKEN = (__ENV.KVBENCH_TOKEN || '').trim();
const PROFILE = __ENV.KVBENCH_PROFILE || '';
const E2E = __ENV.KVBENCH_E2E || 'duration';

if (!URL_BASE || !/^https?:\/\//.test(URL_BASE)) {
  throw new Error('KVBENCH_URL must be the full http(s) URL of the worker\'s /test route');
}
if (!(RATE > 0)) {
  throw new Error('KVBENCH_RATE must be a number of requests per second above 0');
}
if (E2E !== 'duration' && E2E !== 'total') {
  throw new Error(`KVBENCH_E2E must be "duration" or "total", got "${E2E}"`);
}

function withQuery(base, query) {
  if (!query) return base;
  return base + (base.includes('?') ? '&' : '?') + query.replace(/^[?&]/, '');
}
const TARGET = withQuery(URL_BASE, QUERY);

// The worker's worst case for a /test URL, the rule `kvbench run` uses for its default --timeout
// (crates/cli/src/args.rs, worst_case_timeout; tests/e2e/k6-timeout.test.mjs checks both on one
// table): per store measured (the URL's stores or order, else the worker's default STORES: all 8),
// timeout_ms (the URL's, else the worker's default TIMEOUT_MS) x 4 timed calls (setup, read,
// setup again, write) plus the wait for a timed-out call (min(timeout_ms, 5 s)); then + 5 s, so a
// slow store comes back as that store's timeout.
// worst-case:begin
const WORKER_TIMEOUT_MS = 10000;
const WORKER_DEFAULT_STORES = 8;
const CALLS_PER_STORE = 4;
const DRAIN_MAX_MS = 5000; // kvbench_core::measure::DRAIN_MAX_MS
function worstCaseTimeoutMs(url) {
  const at = url.indexOf('?');
  const pairs = (at < 0 ? '' : url.slice(at + 1)).split('&').map((p) => {
    const i = p.indexOf('=');
    return i < 0 ? [p, ''] : [p.slice(0, i), p.slice(i + 1)];
  });
  const get = (name) => {
    const pair = pairs.find(([k]) => k === name);
    return pair ? pair[1] : undefined;
  };
  const ms = get('timeout_ms');
  const timeoutMs = ms !== undefined && /^\+?[0-9]+$/.test(ms) ? Number(ms) : WORKER_TIMEOUT_MS;
  const order = get('order');
  const listed = get('stores') ?? (order !== 'random' ? order : undefined);
  const stores = listed === undefined
    ? WORKER_DEFAULT_STORES
    : Math.max(1, listed.split(/[,%]/).filter((s) => s !== '' && s !== '2C').length);
  return (timeoutMs * CALLS_PER_STORE + Math.min(timeoutMs, DRAIN_MAX_MS)) * stores + 5000;
}
// worst-case:end
const TIMEOUT = (__ENV.KVBENCH_TIMEOUT || '').trim() || `${worstCaseTimeoutMs(TARGET)}ms`;

// The published runs, for `k6 cloud run` (Grafana Cloud k6 public load zones, ids as listed in
// its "Use load zones" page, read 2026-11-30; Bahrain (me-south-1) is listed as unavailable
// there, so Osaka takes its place).
const ZONES_20 = [
  'amazon:us:ashburn', 'amazon:us:columbus', 'amazon:us:palo alto', 'amazon:us:portland',
  'amazon:ca:montreal', 'amazon:br:sao paulo', 'amazon:ie:dublin', 'amazon:gb:london',
  'amazon:de:frankfurt', 'amazon:fr:paris', 'amazon:it:milan', 'amazon:se:stockholm',
  'amazon:in:mumbai', 'amazon:sg:singapore', 'amazon:jp:tokyo', 'amazon:kr:seoul',
  'amazon:au:sydney', 'amazon:cn:hong kong', 'amazon:sa:cape town', 'amazon:jp:osaka',
];

// Little's law, with the knobs above (each a positive number, else the run does not start).
function knob(name, fallback) {
  const raw = __ENV[name];
  const v = raw === undefined || raw === '' ? fallback : Number(raw);
  if (!(v > 0) || !Number.isFinite(v)) throw new Error(`${name} must be a number above 0, got "${raw}"`);
  return v;
}
function scenario(rate, duration) {
  const answerMs = knob('KVBENCH_ANSWER_MS', 2000);
  const margin = knob('KVBENCH_VU_MARGIN', 1.25);
  const maxVUs = Math.ceil(knob('KVBENCH_MAX_VUS', Math.ceil(rate * (answerMs / 1000) * margin)));
  const vus = Math.min(maxVUs, Math.ceil(knob('KVBENCH_VUS', Math.ceil(maxVUs / 4))));
  return {
    executor: 'constant-arrival-rate',
    rate,
    timeUnit: '1s',
    duration,
    preAllocatedVUs: vus,
    maxVUs,
    gracefulStop: '60s',
  };
}

function profileOptions() {
  if (PROFILE === 'regions') {
    // 20 zones × 10 req/s: the cloud splits the arrival rate across the zones by percent.
    const percent = 100 / ZONES_20.length;
    return {
      scenarios: { kvbench: scenario(10 * ZONES_20.length, '30m') },
      cloud: {
        name: 'kvbench: 20 regions x 10 req/s x 30 min',
        distribution: Object.fromEntries(
          ZONES_20.map((z, i) => [`zone${i}`, { loadZone: z, percent }])),
      },
    };
  }
  if (PROFILE === 'single') {
    return {
      scenarios: { kvbench: scenario(400, '10m') },
      cloud: {
        name: 'kvbench: 1 region x 400 req/s x 10 min',
        distribution: { zone: { loadZone: __ENV.KVBENCH_ZONE || 'amazon:de:frankfurt', percent: 100 } },
      },
    };
  }
  if (PROFILE) throw new Error(`KVBENCH_PROFILE must be "regions" or "single", got "${PROFILE}"`);
  return { scenarios: { kvbench: scenario(RATE, DURATION) } };
}

const PROFILE_OPTIONS = profileOptions();
const SCENARIO = PROFILE_OPTIONS.scenarios.kvbench;

export const options = Object.assign(PROFILE_OPTIONS, {
  // Only the end-of-test summary needs these; the JSON output has every sample.
  summaryTrendStats: ['med', 'p(90)', 'p(99)', 'max', 'count'],
  discardResponseBodies: false,
});

const config = new Gauge('kvbench_config');
const requestMs = new Trend('kvbench_request_ms', true);
const readMs = new Trend('kvbench_store_read_ms', true);
const writeMs = new Trend('kvbench_store_write_ms', true);
const connectMs = new Trend('kvbench_store_connect_ms', true);
const valueBytes = new Trend('kvbench_store_value_bytes');
const storeErrors = new Counter('kvbench_store_errors');

// This instance's share of the arrival rate: 1, or its execution segment's width when the test is
// split across instances (k6-operator parallelism, `k6 run --execution-segment`).
function segmentShare() {
  const frac = (x) => {
    const [n, d] = String(x).split('/');
    return d === undefined ? Number(n) : Number(n) / Number(d);
  };
  try {
    const seg = exec.test.options.executionSegment;
    if (!seg) return 1;
    const [from, to] = String(seg).split(':');
    const share = frac(to) - frac(from);
    return share > 0 && share <= 1 ? share : 1;
  } catch (_) {
    return 1;
  }
}

// The run id under which the worker keeps every answer (the Kvbench-Run header): KVBENCH_RUN,
// or one made at setup (which runs once per test, also across cloud load zones, and hands it to
// every VU); KVBENCH_RUN=none sends none. `kvbench import worker <URL> --run <id>` reads them back.
function runId() {
  const given = __ENV.KVBENCH_RUN;
  if (given === 'none') return null;
  if (given) {
    if (!/^[A-Za-z0-9._-]{1,64}$/.test(given)) throw new Error(`KVBENCH_RUN: 1-64 of A-Z a-z 0-9 . _ -, got ${given}`);
    return given;
  }
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*$/, '');
  return `k6-${stamp}-${Math.random().toString(36).slice(2, 8)}`;
}

export function setup() {
  const sc = SCENARIO;
  const run = runId();
  // The URL without its query (which may name stores but never a secret: tokens go in headers).
  config.add(sc.rate * segmentShare(), {
    url: URL_BASE.split('?')[0], duration: sc.duration, timeout: TIMEOUT, e2e: E2E, run: run || '',
  });
  if (run) console.log(`kvbench run id: ${run} (the worker keeps every answer: kvbench import worker <URL> --run ${run})`);
  return { run };
}

const params = {
  headers: TOKEN ? { Authorization: `Bearer ${TOKEN}` } : {},
  tags: { name: '/test' },
  responseType: 'text',
  timeout: TIMEOUT,
};

function short(text) {
  const s = String(text || '').replace(/\s+/g, ' ');
  return s.length > 120 ? `${s.slice(0, 117)}...` : s;
}

// k6 error codes: https://grafana.com/docs/k6/latest/javascript-api/error-codes/
function transportOutcome(res) {
  const code = res.error_code || 0;
  if (code === 1050) return 'timeout';
  if ((code >= 1100 && code < 1300) || (code >= 1300 && code < 1400)) return 'connect';
  return 'transport';
}

function describeError(body) {
  try {
    const e = JSON.parse(body).error;
    if (typeof e === 'string') return short(e);
    if (e && typeof e === 'object') return short(e.parameter ? `${e.parameter}: ${e.message}` : e.message);
  } catch (_) { /* not JSON */ }
  return short(body);
}

function isTime(v) {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0;
}

// Validates the answer the way kvbench's parser does; returns a reason or null.
function invalid(a) {
  if (!a || typeof a !== 'object' || !a.stores || typeof a.stores !== 'object') return 'no stores object';
  const names = Object.keys(a.stores);
  if (names.length === 0) return 'stores is empty';
  for (const n of names) {
    const s = a.stores[n];
    if (!s || typeof s !== 'object') return `stores.${n} is not an object`;
    for (const f of ['read_ms', 'write_ms', 'connect_ms']) {
      if (s[f] != null && !isTime(s[f])) return `stores.${n}.${f} is not a duration`;
    }
    if (s.error && s.error.op != null && s.error.op !== 'read' && s.error.op !== 'write') {
      return `stores.${n}.error.op must be "read" or "write"`;
    }
  }
  return null;
}

let runParams = null;

export default function (data) {
  exec.vu.metrics.metadata.kvbench_req = `${exec.vu.idInTest}:${exec.vu.iterationInScenario}`;
  if (runParams === null) {
    runParams = data && data.run
      ? { ...params, headers: { ...params.headers, 'Kvbench-Run': data.run } }
      : params;
  }
  const res = http.get(TARGET, runParams);
  const t = res.timings;
  const duration = E2E === 'total'
    ? t.duration + t.blocked + t.connecting + t.tls_handshaking
    : t.duration;
  if (res.status === 0) {
    requestMs.add(duration, { outcome: transportOutcome(res), detail: short(res.error) });
    return;
  }
  if (res.status !== 200) {
    requestMs.add(duration, { outcome: `http_${res.status}`, detail: describeError(res.body) });
    return;
  }
  let answer;
  try {
    answer = JSON.parse(res.body);
  } catch (e) {
    requestMs.add(duration, { outcome: 'malformed', detail: short(`body is not JSON: ${e.message}`) });
    return;
  }
  const why = invalid(answer);
  if (why) {
    requestMs.add(duration, { outcome: 'malformed', detail: short(why) });
    return;
  }
  const colo = typeof answer.colo === 'string' ? answer.colo : 'unknown';
  for (const [store, s] of Object.entries(answer.stores)) {
    const err = s.error || null;
    const readFailed = err && err.op !== 'write';
    const writeFailed = err && err.op === 'write';
    valueBytes.add(Number.isFinite(s.value_bytes) ? s.value_bytes : 0, { store, colo });
    if (s.read_ms != null) {
      let result = 'unknown';
      if (readFailed) result = 'error';
      else if (s.hit === true) result = 'hit';
      else if (s.hit === false) result = 'miss';
      readMs.add(s.read_ms, { store, colo, result });
    }
    if (s.write_ms != null) writeMs.add(s.write_ms, { store, colo, result: writeFailed ? 'error' : 'ok' });
    if (s.connect_ms != null) connectMs.add(s.connect_ms, { store, colo });
    if (err) storeErrors.add(1, { store, colo, kind: String(err.kind || 'unknown'), op: err.op || '' });
  }
  // A cold isolate's first answer (its connections opened afresh) is reported apart.
  const tags = answer.isolate_requests === 1 ? { outcome: 'ok', colo, cold: 'true' } : { outcome: 'ok', colo };
  requestMs.add(duration, tags);
}
