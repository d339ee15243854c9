// report.html in a real browser: `kvbench report` re-renders the golden report.json into a fresh
// directory, Debian's chromium (headless, offline) loads the page twice — once dumping the DOM
// after load, once taking a screenshot — and every figure cell the browser parsed (data-row,
// data-col, data-value and its visible text) must agree with the derived summary in report.json.
// The page must stay self-contained: no console message, no network request, no script, no
// external reference. Env: KVBENCH_BIN (default target/debug/kvbench), CHROMIUM_BIN (default
// /usr/bin/chromium); without chromium the suite is skipped unless KVBENCH_REQUIRE_BROWSER=1
// (scripts/test.sh sets it); KVBENCH_E2E_KEEP=1 keeps the directory (report.png) for a look.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { ROOT } from "./procs.mjs";
import {
  CHROMIUM_BIN,
  assertRan,
  cells,
  chromium,
  consoleLines,
  expectedCells,
  mismatches,
  pageRequests,
  run,
  skip,
} from "./browser.mjs";

const KVBENCH_BIN = process.env.KVBENCH_BIN ?? path.join(ROOT, "target/debug/kvbench");
const GOLDEN = path.join(ROOT, "crates/cli/tests/golden/report.json");
const WINDOW = [1280, 6400];
/** The three charts report.html inlines, by figure id. */
const CHARTS = ["latency.svg", "timeline-hits.svg", "timeline.svg"];

let dir, report, dom, domRun, shotRun, domNetlog, shotNetlog;
const t0 = Date.now();

before(async () => {
  if (skip) return;
  assert.ok(CHROMIUM_BIN, `chromium is missing (KVBENCH_REQUIRE_BROWSER=1): run npm run setup or set CHROMIUM_BIN`);
  assert.ok(
    fs.existsSync(KVBENCH_BIN),
    `kvbench binary not found at ${KVBENCH_BIN}: run 'cargo build -p kvbench' or set KVBENCH_BIN`,
  );
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-e2e-report-"));
  const out = path.join(dir, "out");
  fs.mkdirSync(out);
  fs.copyFileSync(GOLDEN, path.join(out, "report.json"));
  assertRan("kvbench report", await run(KVBENCH_BIN, ["report", out]));
  report = JSON.parse(fs.readFileSync(path.join(out, "report.json"), "utf8"));
  const page = pathToFileURL(path.join(out, "report.html")).href;

  domNetlog = path.join(dir, "dom.netlog.json");
  domRun = await chromium(path.join(dir, "profile-dom"), domNetlog, ["--dump-dom", page]);
  assertRan("chromium --dump-dom", domRun);
  dom = domRun.stdout;

  shotNetlog = path.join(dir, "shot.netlog.json");
  shotRun = await chromium(path.join(dir, "profile-shot"), shotNetlog, [
    `--screenshot=${path.join(out, "report.png")}`,
    `--window-size=${WINDOW.join(",")}`,
    page,
  ]);
  assertRan("chromium --screenshot", shotRun);
});

after(() => {
  if (!dir) return;
  if (process.env.KVBENCH_E2E_KEEP === "1") {
    console.log(`kept ${dir} (report.html, report.png); ${Date.now() - t0} ms in all`);
  } else {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("chromium loads report.html with no console message and no network request", { skip }, () => {
  for (const [what, r, netlog] of [
    ["--dump-dom", domRun, domNetlog],
    ["--screenshot", shotRun, shotNetlog],
  ]) {
    assert.deepEqual(consoleLines(r.stderr), [], `chromium ${what}: the page logged to the console`);
    assert.deepEqual(pageRequests(netlog), [], `chromium ${what}: the page made network requests`);
  }
  assert.ok(dom.includes("<h1>kvbench report</h1>"), `--dump-dom printed no report:\n${dom.slice(0, 500)}`);
});

test("the screenshot is a real full-page rendering", { skip }, () => {
  const png = fs.readFileSync(path.join(dir, "out/report.png"));
  assert.ok(png.subarray(0, 8).equals(Buffer.from([137, 80, 78, 71, 13, 10, 26, 10])), "not a PNG");
  assert.deepEqual([png.readUInt32BE(16), png.readUInt32BE(20)], WINDOW, "PNG width x height");
  assert.ok(png.length > 20 * 1024, `report.png is only ${png.length} bytes: a blank page?`);
});

test("the page is self-contained: 3 inline SVG charts, no script, no external reference", { skip }, () => {
  assert.equal((dom.match(/<svg[\s>]/gi) ?? []).length, 3, "inline <svg> elements");
  const figures = [...dom.matchAll(/<figure id="([^"]*)"/g)].map((m) => m[1]).sort();
  assert.deepEqual(figures, CHARTS, "chart figures");
  for (const f of CHARTS) assert.ok(fs.existsSync(path.join(dir, "out", f)), `${f} written beside report.html`);
  assert.equal((dom.match(/<script[\s>]/gi) ?? []).length, 0, "<script> elements");
  assert.deepEqual(
    [...dom.matchAll(/\s(?:src|href|xlink:href|srcset|poster|action)\s*=\s*"\s*(?:https?:)?\/\/[^"]*"/gi)].map((m) => m[0].trim()),
    [],
    "http(s) references",
  );
  // Nothing else either: no relative file, no data: URL, no CSS url() or @import to load. The
  // one kind of reference a reader follows by hand, never loaded: the links to the raw data
  // (report.json beside the page), each an <a> in the provenance table.
  const links = [...dom.matchAll(/<a href="([^"]*)">/g)].map((m) => m[1]);
  assert.deepEqual(links, report.provenance.raw.map((r) => r.href), "links: the raw data only");
  const provenance = dom.slice(dom.indexOf('id="provenance"'));
  assert.ok(links.every((l) => provenance.includes(`href="${l}"`)), "links in the provenance table");
  const refs = [
    ...[...dom.matchAll(/\s(?:src|href|xlink:href|srcset|poster|action|data)\s*=\s*"([^"]*)"/gi)]
      .filter((m) => !m[1].startsWith("#") && !links.includes(m[1]))
      .map((m) => m[0].trim()),
    ...[...dom.matchAll(/url\(\s*['"]?([^'")]*)/gi)].filter((m) => !m[1].startsWith("#")).map((m) => m[0]),
    ...(dom.match(/@import[^;]*/gi) ?? []),
  ];
  assert.deepEqual(refs, [], "references to anything outside the page");
});

test("every figure cell chromium parsed agrees with report.json", { skip }, () => {
  const found = cells(dom);
  // The browser kept every cell the file holds, unchanged (malformed markup gets restructured).
  const source = cells(fs.readFileSync(path.join(dir, "out/report.html"), "utf8"));
  assert.deepEqual(found, source, "figure cells in chromium's DOM vs in report.html");

  const want = expectedCells(report);
  assert.ok(report.summary.latency.length > 0 && want.size > 50, `golden report too small (${want.size} cells)`);
  assert.deepEqual(mismatches(found, want), []);

  // Each section is on the page (the golden report has errors, colos and a cost projection).
  const sections = new Set(found.map((c) => want.get(`${c.row}\u0000${c.col}`)?.section));
  for (const s of ["answer", "total", "latency", "colos", "errors", "cost"]) assert.ok(sections.has(s), `no ${s} cells`);
  // Every row but the first is compared with the one above, paired (the golden's 12 windows).
  const versus = found.filter((c) => c.col === "versus").map((c) => c.text);
  assert.equal(versus.length, report.summary.comparison.rows.length - 1, "paired verdict rows");
  assert.ok(versus.every((t) => /^vs \S+, paired over \d+ spans: p50 ×/.test(t)), versus.join("\n"));
});

test("the first screen: where it ran, then the answer; the bill and the provenance after", { skip }, () => {
  const at = (needle) => {
    const i = dom.indexOf(needle);
    assert.ok(i >= 0, `${needle} is on the page`);
    return i;
  };
  // Chromium's DOM, in page order: the title, where and when, the answer, what went wrong, the
  // runs, then the details.
  const order = ["<h1>kvbench report</h1>", 'id="where"', 'id="answer"', "<h2>What went wrong</h2>", 'id="provenance"', 'id="latency"', 'id="month"', 'id="cost"'];
  const positions = order.map(at);
  for (let i = 1; i < order.length; i++) assert.ok(positions[i - 1] < positions[i], `${order[i - 1]} before ${order[i]}`);
  assert.match(dom, /Measured on the local stack \(this machine\)/);
  assert.ok(dom.includes(report.provenance.build.commit), "the page names its commit");
  assert.match(dom, /cold answer\(s\) left out/);
});

test("every summary.latency row is in the latency table", { skip }, () => {
  const rows = new Set(cells(dom).map((c) => c.row));
  const missing = report.summary.latency.map((r) => r.name).filter((n) => !rows.has(n));
  assert.deepEqual(missing, [], "summary.latency rows missing from report.html");
});
