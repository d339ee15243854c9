// report.html as a browser sees it, shared by the suites that check a rendered report (the
// golden one written by `kvbench report`, and GET /report of the worker): Debian's chromium run
// headless and offline with its console and NetLog captured, the figure cells (data-row,
// data-col, data-value, text) read from the DOM, and the cells report.json implies.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

export const CHROMIUM_BIN = onPath(process.env.CHROMIUM_BIN || "/usr/bin/chromium");
export const TIMEOUT_MS = 60_000;

export const skip =
  CHROMIUM_BIN === null && process.env.KVBENCH_REQUIRE_BROWSER !== "1"
    ? `chromium not found (${process.env.CHROMIUM_BIN || "/usr/bin/chromium"}; set CHROMIUM_BIN or ` +
      "run npm run setup); set KVBENCH_REQUIRE_BROWSER=1 to make this a failure"
    : false;

/** `bin` itself if it is a path to a file, else its match on PATH; null when not found. */
export function onPath(bin) {
  const candidates = bin.includes("/")
    ? [bin]
    : (process.env.PATH ?? "").split(path.delimiter).filter(Boolean).map((d) => path.join(d, bin));
  return candidates.find((c) => fs.existsSync(c) && fs.statSync(c).isFile()) ?? null;
}

/**
 * Runs `bin` to completion in its own process group, killing the whole group (chromium forks
 * zygote, GPU and renderer processes) if it outlives `TIMEOUT_MS`: { code, signal, timedOut,
 * stdout, stderr, ms }.
 */
export function run(bin, args) {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const child = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"], detached: true });
    const out = [];
    const err = [];
    child.stdout.on("data", (d) => out.push(d));
    child.stderr.on("data", (d) => err.push(d));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        child.kill("SIGKILL");
      }
    }, TIMEOUT_MS);
    child.once("error", (e) => {
      clearTimeout(timer);
      reject(new Error(`${bin}: cannot start: ${e.message}`));
    });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      resolve({
        code,
        signal,
        timedOut,
        stdout: Buffer.concat(out).toString("utf8"),
        stderr: Buffer.concat(err).toString("utf8"),
        ms: Date.now() - t0,
      });
    });
  });
}

export function assertRan(what, r) {
  const tail = r.stderr.split("\n").filter((l) => !/dbus|D-Bus/.test(l)).slice(-30).join("\n");
  assert.ok(!r.timedOut, `${what} did not finish within ${TIMEOUT_MS / 1000} s (killed):\n${tail}`);
  assert.equal(r.code, 0, `${what} exited with ${r.code ?? r.signal}:\n${tail}`);
}

/**
 * Chromium headless, offline: no sync, updates or background fetches, every host name resolving
 * to nothing (the browser's own update/account pings still start, so they must fail fast), all
 * requests recorded in a NetLog, page console messages logged to stderr.
 */
export function chromium(profile, netlog, extra) {
  return run(CHROMIUM_BIN, [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    `--user-data-dir=${profile}`,
    `--log-net-log=${netlog}`,
    "--enable-logging=stderr",
    "--v=0",
    ...extra,
  ]);
}

/**
 * Page console messages in chromium's stderr. Chromium 156 logs every level (log, warn, error,
 * uncaught exception) the same way:
 *   [pid:tid:MMDD/HHMMSS.us:INFO:CONSOLE:4] "message", source: file:///…/page.html (4)
 * (older builds wrote `INFO:CONSOLE(4)`). The page has no script, so any such line is a failure;
 * so is a "Failed to load resource" line, should a build log one (156 does not: a missing image
 * or a refused request leaves no trace on stderr, hence the NetLog and the reference check).
 */
export function consoleLines(stderr) {
  return stderr
    .split("\n")
    .filter((l) => /:CONSOLE[:(]|Failed to load resource/.test(l));
}

/**
 * Requests the page started, from a NetLog: URL requests whose isolation key or cookie site is the
 * page's file:// origin (chromium's own pings have `null null` or a google.com key). file://
 * subresources bypass the network stack and are caught by the reference check on the DOM.
 */
export function pageRequests(netlogFile) {
  const log = JSON.parse(fs.readFileSync(netlogFile, "utf8"));
  const START = log.constants.logEventTypes.URL_REQUEST_START_JOB;
  return log.events
    .filter((e) => e.type === START && e.params?.url)
    .filter((e) =>
      [e.params.network_isolation_key, e.params.site_for_cookies, e.params.initiator].some(
        (v) => typeof v === "string" && (v.includes("file://") || v === "null"),
      ),
    )
    .map((e) => e.params.url);
}

/** The few entities chromium's serializer (and kvbench's `esc`) write. */
export function decode(text) {
  return text.replace(/&(#x[0-9a-f]+|#\d+|amp|lt|gt|quot|apos|nbsp);/gi, (_, e) => {
    const named = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: "\u00a0" }[e.toLowerCase()];
    if (named) return named;
    return String.fromCodePoint(e[1] === "x" || e[1] === "X" ? parseInt(e.slice(2), 16) : Number(e.slice(1)));
  });
}

/** Every element carrying data-row: [{ row, col, value, text }] in document order. */
export function cells(html) {
  const found = [];
  // Start tags (quoted attribute values may hold '>'); a figure cell's content runs to its end tag
  // (it holds at most a <span>, never another element of its own kind).
  const tag = /<([a-z][a-z0-9]*)((?:\s+[^\s"'>\/=]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'>]+))?)*)\s*\/?>/gi;
  const lower = html.toLowerCase();
  for (const m of html.matchAll(tag)) {
    if (!/\sdata-row\s*=/.test(m[2])) continue;
    const start = m.index + m[0].length;
    const end = lower.indexOf(`</${m[1].toLowerCase()}`, start);
    const content = end < 0 ? "" : html.slice(start, end);
    const attrs = {};
    for (const a of m[2].matchAll(/([^\s"'>\/=]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))/g)) {
      attrs[a[1].toLowerCase()] = decode(a[2] ?? a[3] ?? a[4]);
    }
    found.push({
      row: attrs["data-row"],
      col: attrs["data-col"],
      value: attrs["data-value"],
      text: decode(content.replace(/<[^>]*>/g, "")).trim(),
    });
  }
  return found;
}

/**
 * `v.toFixed(2)` as Rust's `{:.2}` writes it: the two differ only on an exact binary tie (x.125,
 * x.375, x.625, x.875 — e.g. a quantile of 48 625 µs), which Rust rounds half to even (48.62) and
 * JavaScript half up (48.63).
 */
export function fixed2(v) {
  const cents = v * 100; // exact for a tie: v * 8 is an integer
  if (Number.isInteger(v * 8) && !Number.isInteger(v * 4) && Math.abs(cents) < 2 ** 52) {
    const down = Math.floor(cents);
    return ((down % 2 === 0 ? down : down + 1) / 100).toFixed(2);
  }
  return v.toFixed(2);
}
/** A figure of `count` values: `few` where the count cannot support a percentile (summary null). */
const q = (count, v) => (v === null || v === undefined ? ((count ?? 0) > 0 ? "few" : "-") : fixed2(v));
const pct = (p) => String(Math.round(p * 100 * 1e6) / 1e6);

/** The line under a row of the answer: `Row::note` and `Row::flag` (crates/report/src/comparison.rs). */
function acrossTheRun(r) {
  const note = windowsNote(r);
  const flags = [r.stability, r.across_runs].filter(Boolean).map(flagOf).filter(Boolean);
  const withRuns = r.across_runs ? `${note} · ${textOf(r.across_runs)}` : note;
  return flags.length === 0 ? withRuns : `${withRuns} · ${flags.join(" · ")}`;
}

const range = (s) => `${fixed2(s.min_ms)}–${fixed2(s.max_ms)}`;
/** `Stability::text`: each percentile's range across the spans (or merged runs). */
function textOf(st) {
  const ranges = st.spread.map((s) => `p${pct(s.p)} ${range(s)}`);
  const what = ranges.length === 0 ? "no span has reads enough for a percentile" : `${ranges.join(" · ")} ms`;
  return st.runs ? `${what} across ${st.spans} merged runs` : `${what} across ${st.spans} spans of ${st.windows} windows`;
}
/** `Stability::flag`. */
function flagOf(st) {
  const unstable = st.spread.filter((s) => s.unstable).map((s) => `p${pct(s.p)} ranged ${range(s)} ms`);
  return unstable.length === 0 ? null : `unstable: ${unstable.join(", ")} across ${st.spans} ${st.runs ? "merged runs" : "spans"}`;
}

/** `Versus::text` (crates/report/src/comparison.rs): the row against the one above it. */
function versusText(v, store) {
  const p50 = v.paired === "unpaired" ? undefined : v.ratios[0];
  if (p50 === undefined) return `vs ${v.store}: unpaired (${v.why ?? ""}): compared by whether the p50 intervals overlap`;
  const ratios = v.ratios.map((r) => `p${pct(r.p)} ×${fixed2(r.ratio)} (${fixed2(r.low)}–${fixed2(r.high)})`);
  const faster = p50.high < 1;
  const [fast, slow] = faster ? [store, v.store] : [v.store, store];
  const [by, low, high] = (faster ? [1 / p50.ratio, 1 / p50.high, 1 / p50.low] : [p50.ratio, p50.low, p50.high]).map(
    (x) => ((x - 1) * 100).toFixed(0),
  );
  const verdict =
    p50.low > 1 || p50.high < 1
      ? `${fast} faster than ${slow} by ${by}% (${low}–${high}%)`
      : `no difference beyond ±${((Math.sqrt(p50.high / p50.low) - 1) * 100).toFixed(0)}%: no leader`;
  const what = v.paired === "runs" ? "merged runs" : "spans";
  return `vs ${v.store}, paired over ${p50.units} ${what}: ${ratios.join(" · ")}: ${verdict}`;
}

/** `Row::note` without the merged runs' part. */
function windowsNote(r) {
  if (!r.stability) {
    return r.vantage !== undefined
      ? `† within-run intervals only: ${r.windows} stretch(es) of the window with reads, 8 needed to measure the spread across it`
      : `† within-run intervals only: ${r.windows} timeline window(s) with reads, 8 needed to measure the spread across the run`;
  }
  return `across the run: ${textOf(r.stability)}`;
}

/**
 * What the page must show, from report.json: a Map "row\u0000col" → { value (number or null),
 * text, section }. Mirrors crates/report/src/print/html.rs.
 */
export function expectedCells(report) {
  const s = report.summary;
  const t = report.total;
  const want = new Map();
  const put = (section, row, col, value, text) => {
    const key = `${row}\u0000${col}`;
    assert.ok(!want.has(key), `report.json yields two cells ${row} / ${col}`);
    want.set(key, { section, row, col, value, text });
  };
  const count = (section, row, col, n) => put(section, row, col, n, String(n));

  count("total", "total", "scheduled", t.scheduled);
  count("total", "total", "sent", t.sent);
  count("total", "total", "answered", t.answered);
  count("total", "total", "failed", Object.values(t.failures).reduce((a, b) => a + b, 0));
  // The worker's failures: it answered, not with a /test answer; every other kind is the client's.
  const worker = (kind) => /^http_\d+$/.test(kind) || kind === "malformed" || kind === "truncated";
  const failed = (side) =>
    Object.entries(t.failures)
      .filter(([kind]) => worker(kind) === (side === "worker"))
      .reduce((a, [, n]) => a + n, 0);
  count("total", "total", "client_failed", failed("client"));
  count("total", "total", "worker_failed", failed("worker"));
  count("total", "total", "not_sent", t.failures.not_sent ?? 0);
  count("total", "total", "retried", t.retried ?? 0);
  count("total", "total", "cold", t.cold ?? 0);
  const keepFailed = report.runs.map((r) => r.import?.keep_failed).filter((n) => n !== undefined && n !== null);
  if (keepFailed.length > 0) count("total", "total", "keep_failed", keepFailed.reduce((a, b) => a + b, 0));
  put("total", "total", "achieved_rate", t.achieved_rate, fixed2(t.achieved_rate));

  // The answer first: each store's reads with their intervals (crates/report/src/comparison.rs).
  const interval = (c) =>
    c.ms !== undefined && c.low_ms !== undefined && c.high_ms !== undefined
      ? `${fixed2(c.ms)} (${fixed2(c.low_ms)}–${fixed2(c.high_ms)})${c.within_run_only ? "†" : ""}`
      : (c.too_few ?? "-");
  for (const r of s.comparison?.rows ?? []) {
    const row = r.vantage === undefined ? `answer ${r.store}` : `answer ${r.vantage} ${r.store}`;
    count("answer", row, "reads", r.reads);
    for (const p of ["p50", "p90", "p99"]) put("answer", row, `${p}_ms`, r[p].ms ?? null, interval(r[p]));
    if (r.error_rate !== undefined) put("answer", row, "error_rate", r.error_rate, `${fixed2(r.error_rate * 100)}%`);
    if (r.monthly_usd !== undefined) put("answer", row, "monthly_usd", r.monthly_usd, fixed2(r.monthly_usd));
    put("answer", row, "stability", null, acrossTheRun(r));
    if (r.versus) put("answer", row, "versus", null, versusText(r.versus, r.store));
  }

  for (const r of s.latency) {
    count("latency", r.name, "count", r.count);
    for (const col of ["p50_ms", "p90_ms", "p95_ms", "p99_ms", "max_ms", "mean_ms"]) {
      put("latency", r.name, col, r[col], q(r.count, r[col]));
    }
    if (r.errors !== null && r.errors !== undefined) count("latency", r.name, "errors", r.errors);
  }

  const stores = Object.keys(t.stores);
  const perRow = (id, rows) => {
    for (const [name, x] of Object.entries(rows)) {
      count(id, `${id} ${name}`, "answered", x.answered);
      for (const store of stores) {
        const r = x.read[store];
        put(id, `${id} ${name} ${store}`, "p50_ms", r?.p50_ms ?? null, `${q(r?.count, r?.p50_ms)} / ${q(r?.count, r?.p99_ms)}`);
      }
    }
  };
  const vantages = Object.entries(report.vantages ?? {});
  if (vantages.length > 0) {
    // Kept answers: the vantage × store table in place of the per-label one.
    for (const [label, v] of vantages) {
      const row = `vantage ${label}`;
      for (const col of ["warm", "cold", "failed"]) count("vantages", row, col, v[col]);
      for (const store of stores) {
        // The warm answers' reads when the point has any, else its cold answers'.
        const l = s.labels[label];
        const anyWarm = Object.values(l?.read ?? {}).some((q) => q.count > 0);
        const r = (anyWarm || !l?.cold_read ? l?.read : l.cold_read)?.[store];
        const c = (v) => q(r?.count, v);
        put("vantages", row, store, r?.p50_ms ?? null, `${c(r?.p50_ms)}p90 ${c(r?.p90_ms)} · p99 ${c(r?.p99_ms)}`);
      }
    }
  } else if (Object.keys(s.labels).length > 1) perRow("labels", s.labels);
  // The History section (crates/report/src/print/history.rs) has no data-row cells: its figures
  // are read from report.json's `days` histograms at render time, which this mirror does not
  // decode (no summary field carries them), so it is checked natively instead.
  perRow("colos", s.colos);

  for (const [kind, n] of Object.entries(t.failures)) count("errors", `request ${kind}`, "count", n);
  for (const [store, st] of Object.entries(t.stores)) {
    for (const [kind, n] of Object.entries(st.errors)) count("errors", `${store} ${kind}`, "count", n);
  }

  for (const l of report.cost?.lines ?? []) {
    put("cost", `cost ${l.store} ${l.plan}`, "monthly_usd", l.monthly_usd, fixed2(l.monthly_usd));
  }
  const w = report.cost?.worker;
  if (w) put("cost", "cost worker", "monthly_usd", w.monthly_usd, fixed2(w.monthly_usd));
  if (report.cost && (w || report.cost.lines.length > 0)) {
    // The month a deployer pays: the worker, then each store (in name order) at its cheapest
    // current plan that fits — summed in the renderer's order, so the floats agree exactly.
    const best = new Map();
    for (const l of report.cost.lines) {
      if (!best.has(l.store)) best.set(l.store, null);
      if (l.historical || l.over_limit) continue;
      const b = best.get(l.store);
      if (b === null || l.monthly_usd < b.monthly_usd) best.set(l.store, l);
    }
    let usd = w ? w.monthly_usd : 0;
    for (const store of [...best.keys()].sort()) if (best.get(store)) usd += best.get(store).monthly_usd;
    put("cost", "month", "usd", usd, fixed2(usd));
  }
  return want;
}

/** Every disagreement between the page's cells and report.json, one line each. */
export function mismatches(found, want) {
  const problems = [];
  const seen = new Map();
  for (const c of found) {
    const key = `${c.row}\u0000${c.col}`;
    const where = `cell ${JSON.stringify(c.row)} / ${c.col}`;
    if (seen.has(key)) {
      problems.push(`${where} appears twice`);
      continue;
    }
    seen.set(key, c);
    const w = want.get(key);
    if (!w) {
      problems.push(`${where} (data-value ${JSON.stringify(c.value)}) is not in report.json`);
      continue;
    }
    if (w.value === null) {
      if (c.value !== "") problems.push(`${where}: data-value ${JSON.stringify(c.value)}, report.json has null`);
    } else if (!/^-?\d+(\.\d+)?(e[+-]?\d+)?$/i.test(c.value ?? "") || Number(c.value) !== w.value) {
      problems.push(`${where}: data-value ${JSON.stringify(c.value)}, report.json has ${w.value}`);
    }
    if (c.text !== w.text) problems.push(`${where}: shows ${JSON.stringify(c.text)}, expected ${JSON.stringify(w.text)}`);
  }
  for (const [key, w] of want) {
    if (seen.has(key)) continue;
    problems.push(
      w.section === "latency"
        ? `summary.latency row ${JSON.stringify(w.row)} column ${w.col} is missing from report.html`
        : `${w.section} cell ${JSON.stringify(w.row)} / ${w.col} is missing from report.html`,
    );
  }
  return problems;
}

