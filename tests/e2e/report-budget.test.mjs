// The report in bounded memory, in workerd: the report worker renders the default view (24 h)
// of a synthetic fleet — 31 members and 11 hints, eight stores, an answer every 300 s — and a
// week of it, each within its memory budget (the wasm memory after the render: it only grows,
// so it is the most the render needed); a window past the budget is refused with a 413 naming
// the window, not rendered into a hung isolate. Through the benchmark worker, 20 parallel views
// of one window cost one render (the others share it or its cached page) while /healthz and
// /test keep answering. Run `npm run build` first (scripts/test.sh does).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { sleep, startStack } from "./procs.mjs";

const MiB = 1024 * 1024;
const STORES = ["kv", "upstash", "redis", "denokv", "do", "d1", "r2", "cache"];
const VANTAGE_POINTS = 42;
/** What a render may take: the default view, and a week (kept in docs/probes.md's table). */
const DEFAULT_VIEW_BUDGET = 32 * MiB;
const WEEK_BUDGET = 64 * MiB;
/** The report worker's MAX_ANSWERS (crates/report-worker/src/lib.rs). */
const MAX_ANSWERS = 100_000;

let mf;
before(async () => {
  mf = await startStack({
    STORES: "kv,do",
    PROBE_HINTS: "weur,enam",
    PROBE_EVERY: "1",
    PROBE_COLO_URL: "none",
    BENCH_OPEN: "true",
    PROBE_BUDGET_USD: "1000000",
  });
});
after(async () => {
  await mf?.dispose();
});

/** A pseudo-random generator, so every run renders the same answers. */
function rng(seed) {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 4294967296;
  };
}

/** Kept lines of `points` vantage points answering every `every_s` over `span_s`, each point's
 * answers in a row (as the worker streams them), as NDJSON chunks ending with the end line. */
function* fleet(origin, points, every_s, span_s) {
  const r = rng(7);
  let n = 0;
  for (let p = 0; p < points; p++) {
    const label = p < 31 ? `aws:region-${p}` : `hint-${p - 31}`;
    const colo = `C${p % 30}`;
    let chunk = "";
    for (let i = 0; i < span_s / every_s; i++) {
      const stores = {};
      for (const [s, name] of STORES.entries()) {
        const hit = r() > 0.1;
        stores[name] = {
          read_ms: Math.round(r() * 4000 * (s + 1)) / 10,
          hit,
          value_bytes: hit ? 4096 + Math.floor(r() * 61440) : 0,
          write_ms: hit ? null : Math.round(r() * 9000) / 10,
          error: null,
        };
      }
      chunk +=
        JSON.stringify({
          seq: i + 1,
          t_ms: origin + i * every_s * 1000 + p * 37,
          label,
          vantage: p < 31 ? "member" : "hint",
          colo,
          cold: i % 2 === 0,
          handler_ms: 20 + Math.floor(r() * 200),
          answer: { key: String(Math.floor(r() * 1000)), colo, isolate_requests: 2, stores },
        }) + "\n";
      n++;
    }
    yield chunk;
  }
  yield JSON.stringify({ end: true, lines: n }) + "\n";
}

/** POST the lines to the report worker's /render; its status, headers and body. */
async function render(chunks, origin, span_s, format = "html") {
  const report = await mf.getWorker("kvbench-report");
  const enc = new TextEncoder();
  const body = new ReadableStream({
    pull(c) {
      const next = chunks.next();
      if (next.done) c.close();
      else c.enqueue(enc.encode(next.value));
    },
  });
  const res = await report.fetch(`https://report/render?origin_ms=${origin}&span_ms=${span_s * 1000}&format=${format}`, {
    method: "POST",
    body,
    duplex: "half",
  });
  return { res, text: await res.text() };
}

test("the fleet's default view and a week of it render within their memory budgets", async () => {
  const origin = Date.UTC(2026, 10, 1);
  const day = await render(fleet(origin, VANTAGE_POINTS, 300, 86_400), origin, 86_400);
  assert.equal(day.res.status, 200, day.text.slice(0, 300));
  assert.equal(Number(day.res.headers.get("kvbench-render-answers")), VANTAGE_POINTS * 288);
  const dayBytes = Number(day.res.headers.get("kvbench-render-wasm-bytes"));
  assert.ok(dayBytes > 0, "the report worker says its memory");
  console.log(`# default view (24 h, ${VANTAGE_POINTS * 288} answers): wasm memory ${(dayBytes / MiB).toFixed(1)} MiB`);
  assert.ok(dayBytes <= DEFAULT_VIEW_BUDGET, `${(dayBytes / MiB).toFixed(1)} MiB for the default view`);
  // Every vantage point is in the page.
  for (const label of ["aws:region-0", "aws:region-30", "hint-0", "hint-10"]) assert.ok(day.text.includes(label), label);
  // Each vantage point's rows count the spread across its own stretches of the day (16 of
  // 90 minutes: 6 of the 15-minute timeline windows), never the within-run interval alone.
  const json = await render(fleet(origin, VANTAGE_POINTS, 300, 86_400), origin, 86_400, "json");
  assert.equal(json.res.status, 200, json.text.slice(0, 300));
  const report = JSON.parse(json.text);
  assert.equal(report.stretches.stretch_s, 5400);
  const kib = (n) => (n / 1024).toFixed(0);
  console.log(`# default view's report.json: ${kib(json.text.length)} KiB, its stretches ${kib(JSON.stringify(report.stretches).length)} KiB`);
  const rows = report.summary.comparison.rows;
  assert.equal(rows.length, VANTAGE_POINTS * STORES.length);
  for (const row of rows) {
    assert.ok(row.vantage, JSON.stringify(row).slice(0, 200));
    assert.deepEqual([row.basis, row.windows], ["windows", 16], `${row.vantage} ${row.store}`);
    assert.ok(row.stability && row.stability.spans >= 5, `${row.vantage} ${row.store}`);
    assert.ok(!row.p50.within_run_only && Number.isFinite(row.p50.low_ms), `${row.vantage} ${row.store}`);
  }

  const week = await render(fleet(origin, VANTAGE_POINTS, 300, 7 * 86_400), origin, 7 * 86_400);
  assert.equal(week.res.status, 200, week.text.slice(0, 300));
  const weekBytes = Number(week.res.headers.get("kvbench-render-wasm-bytes"));
  console.log(`# 7 days (${VANTAGE_POINTS * 2016} answers): wasm memory ${(weekBytes / MiB).toFixed(1)} MiB`);
  assert.ok(weekBytes <= WEEK_BUDGET, `${(weekBytes / MiB).toFixed(1)} MiB for a week`);
});

test("a window past the report's budget is refused with a 413 naming the window", async () => {
  const origin = Date.UTC(2026, 10, 1);
  // Short lines (failures) past the budget: refused as the count passes it.
  function* many() {
    const n = MAX_ANSWERS + 10;
    for (let i = 0; i < n; i += 10_000) {
      let chunk = "";
      for (let j = i; j < Math.min(n, i + 10_000); j++) {
        chunk += `{"seq":${j + 1},"t_ms":${origin + j},"label":"x","vantage":"member","failure":{"kind":"timeout","status":null,"detail":"none"}}\n`;
      }
      yield chunk;
    }
    yield `{"end":true,"lines":${n}}\n`;
  }
  const r = await render(many(), origin, 86_400);
  assert.equal(r.res.status, 413, r.text.slice(0, 300));
  assert.match(r.text, new RegExp(`more than ${MAX_ANSWERS} kept answers.*shorter window`));
});

test("20 parallel views of one window are one render, and /healthz and /test keep answering", async () => {
  const start = await mf.dispatchFetch("http://localhost/probes/start?every=1", { method: "POST" });
  assert.equal(start.status, 200, await start.text());
  for (let i = 0; i < 80; i++) {
    const list = await (await mf.dispatchFetch("http://localhost/probes")).json();
    if (list.probes.every((p) => p.kept >= 2)) break;
    await sleep(250);
  }
  // Windows from 7 h to 24 h (and 1d, 86400): all widened to the 24 h preset.
  const windows = [...Array.from({ length: 18 }, (_, i) => `${i + 7}h`), "1d", "86400"];
  const views = windows.map(async (w) => {
    const res = await mf.dispatchFetch(`http://localhost/report?window=${w}`);
    const text = await res.text();
    return { w, status: res.status, how: res.headers.get("kvbench-render"), window: res.headers.get("kvbench-window-s"), text };
  });
  const others = [
    ...Array.from({ length: 5 }, () => mf.dispatchFetch("http://localhost/healthz")),
    ...Array.from({ length: 5 }, () => mf.dispatchFetch("http://localhost/test")),
  ].map(async (p) => {
    const res = await p;
    await res.text();
    return res.status;
  });
  const done = await Promise.all(views);
  for (const v of done) {
    assert.equal(v.status, 200, `${v.w}: ${v.text.slice(0, 300)}`);
    assert.equal(v.window, "86400", v.w);
    assert.ok(v.text.includes("<h1>kvbench report</h1>"), v.w);
  }
  const made = done.filter((v) => v.how === "made").length;
  const shared = done.filter((v) => v.how === "shared").length;
  console.log(`# 20 views: made ${made}, shared ${shared}, cached ${done.length - made - shared}`);
  assert.equal(made, 1, JSON.stringify(done.map((v) => [v.w, v.how])));
  assert.deepEqual(await Promise.all(others), Array(10).fill(200));
  await (await mf.dispatchFetch("http://localhost/probes/stop", { method: "POST" })).text();
  // A window that is not a duration is still a 400 naming it.
  const bad = await mf.dispatchFetch("http://localhost/report?window=soon");
  assert.equal(bad.status, 400);
  assert.equal((await bad.json()).error.parameter, "window");
  // Given twice: a 400, not last-one-wins.
  const twice = await mf.dispatchFetch("http://localhost/report?window=1h&window=2h");
  assert.equal(twice.status, 400);
  assert.match((await twice.json()).error.message, /more than once/);
});
