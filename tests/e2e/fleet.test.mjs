// The fleet on loopback: three members (the member build, build-member/, each in a workerd of
// its own, as placed members run it) behind counting proxies, a member that answers 503 and one that
// is not there; the main worker's probes call each member's /test with BENCH_TOKEN on their own
// alarms and keep every outcome. Checked: every request a member answered is kept exactly once
// under its label (answers kept = answers the members sent, by the proxies' count), with
// `vantage: "member"`, the placement header as sent and the member's colo; a 503 and an
// unreachable member are kept failure lines, never gaps, and reach the report as failures of
// their label; the token reaches the members and never a kept line. Where each answer ran has two
// witnesses: the proxies' cf-placement, and the colo each member's isolate is told by a stand-in
// of Cloudflare's trace (scripts/trace-standin.mjs, a colo per member; one outside its region, one
// that fails): every kept line carries its member's trace colo exactly, the member asks it once
// (its isolate is new once), and the member whose trace is outside its region is counted apart and
// named in the report's What went wrong. Bounded in time.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { freePort, sleep, startRedis, startStack, stop, assertMs } from "./procs.mjs";
import { startTraceStandIn } from "../../scripts/trace-standin.mjs";

const TOKEN = "fleet-e2e-token-" + process.pid;
// The three real members: label, the cf-placement their answers get, the colo the trace tells
// their isolate ("!500": the trace fails), what the kept line says of it, and what that makes
// them. aws:eu-central-1 expects FRA: its trace (NRT) is outside its region, and disagrees with
// its cf-placement (IAD).
const PLACED = [
  ["aws:us-east-1", "remote-IAD", "IAD", "IAD", "placed"],
  ["aws:eu-central-1", "remote-IAD", "NRT", "NRT", "trace_elsewhere"],
  ["local-3", null, "!500", "unknown", "unplaced"],
];
const [EAST, CENTRAL] = PLACED.map(([label]) => label);
const BIG_PAD = 900_000;
let redis;
let members = [];
let proxies = [];
let down;
let main;
let mainVars;
let traces;
// The main worker's Durable Object storage, kept across its restart (a deploy with a new FLEET).
const persist = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-e2e-fleet-"));

/** A proxy in front of `target` counting what it forwarded and what it answered; it adds
 * `placement` as the `cf-placement` header a placed worker's answer carries (none when null). */
async function countingProxy(label, target, placement) {
  const counts = { requests: 0, answered: 0, tokens: new Set() };
  const server = http.createServer((req, res) => {
    counts.requests++;
    counts.tokens.add(req.headers.authorization ?? "");
    const up = http.request(target + req.url, { method: req.method, headers: req.headers }, (r) => {
      const headers = { ...r.headers, ...(placement ? { "cf-placement": placement } : {}) };
      res.writeHead(r.statusCode, headers);
      r.pipe(res);
      r.on("end", () => counts.answered++);
    });
    up.on("error", (e) => {
      res.writeHead(502);
      res.end(String(e));
    });
    req.pipe(up);
  });
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  return { server, counts, url: `http://127.0.0.1:${server.address().port}` };
}

before(async () => {
  redis = await startRedis();
  const stores = { REDIS_URL: `redis://127.0.0.1:${redis.port}`, STORES: "kv,do,d1,r2,redis", BENCH_TOKEN: TOKEN };
  // The trace each worker is told: the main worker's hint probe LHR, each member its own.
  traces = await startTraceStandIn({ main: "LHR", ...Object.fromEntries(PLACED.map(([label, , trace]) => [label, trace])) });
  // Placed in its region's metro; placed, but its trace outside its region's metro; not placed
  // at all (and its trace failing).
  for (const [label, placement, , trace, check] of PLACED) {
    const mf = await startStack({ ...stores, PROBE_COLO_URL: traces.url(label) }, { host: "127.0.0.1", port: 0 }, { member: true });
    members.push(mf);
    proxies.push({ label, check, placement, trace, ...(await countingProxy(label, (await mf.ready).toString().replace(/\/$/, ""), placement)) });
  }
  // A member that is up but refuses (503 with a body that has a terminal escape), one that is not.
  const busy = http.createServer((req, res) => {
    busy.count = (busy.count ?? 0) + 1;
    res.writeHead(503, { "content-type": "text/plain" });
    res.end("overloaded \u001b[31mred\u001b[0m");
  });
  await new Promise((ok) => busy.listen(0, "127.0.0.1", ok));
  proxies.push({ label: "busy", server: busy, counts: null, url: `http://127.0.0.1:${busy.address().port}` });
  // A member that redirects to another site (which must never be asked), and one whose body
  // never ends (read up to the 1 MiB a member's answer may take, then dropped).
  const elsewhere = http.createServer((req, res) => {
    elsewhere.count = (elsewhere.count ?? 0) + 1;
    res.end(JSON.stringify({ colo: "EVIL", stores: {} }));
  });
  await new Promise((ok) => elsewhere.listen(0, "127.0.0.1", ok));
  proxies.push({ label: "elsewhere", server: elsewhere, counts: null, url: null });
  const moved = http.createServer((req, res) => {
    moved.count = (moved.count ?? 0) + 1;
    res.writeHead(302, { location: `http://127.0.0.1:${elsewhere.address().port}/test` });
    res.end();
  });
  await new Promise((ok) => moved.listen(0, "127.0.0.1", ok));
  proxies.push({ label: "moved", server: moved, counts: null, url: `http://127.0.0.1:${moved.address().port}` });
  const endless = http.createServer((req, res) => {
    endless.count = (endless.count ?? 0) + 1;
    res.writeHead(200, { "content-type": "application/json" });
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    const pump = () => {
      while (!res.destroyed && res.write(chunk));
    };
    res.on("drain", pump);
    req.socket.on("close", () => res.destroy());
    pump();
  });
  await new Promise((ok) => endless.listen(0, "127.0.0.1", ok));
  proxies.push({ label: "endless", server: endless, counts: null, url: `http://127.0.0.1:${endless.address().port}` });
  // A member whose answers are large (900 KB, under the 1 MiB cut): kept as sent, so a page of
  // /probes/answers ends on its byte bound (4 MiB) long before its 500 lines.
  const big = http.createServer((req, res) => {
    big.count = (big.count ?? 0) + 1;
    const n = big.count;
    res.writeHead(200, { "content-type": "application/json", "server-timing": "kvbench;dur=1.5" });
    res.end(JSON.stringify({ colo: "BIG", isolate_requests: n, stores: {}, n, pad: "p".repeat(BIG_PAD) }));
  });
  await new Promise((ok) => big.listen(0, "127.0.0.1", ok));
  proxies.push({ label: "big", server: big, counts: null, url: `http://127.0.0.1:${big.address().port}` });
  // A member that takes the request and never answers: its own probe waits out the member
  // timeout (150 s), and every other vantage point goes on meanwhile.
  const hang = http.createServer((req) => {
    hang.count = (hang.count ?? 0) + 1;
    hang.held = [...(hang.held ?? []), req];
  });
  await new Promise((ok) => hang.listen(0, "127.0.0.1", ok));
  proxies.push({ label: "hang", server: hang, counts: null, url: `http://127.0.0.1:${hang.address().port}` });
  down = await freePort();
  const fleet = [...proxies.filter((p) => p.url).map((p) => `${p.label}=${p.url}`), `gone=http://127.0.0.1:${down}`].join(",");
  mainVars = { ...stores, FLEET: fleet, PROBE_HINTS: "weur", PROBE_EVERY: "1", PROBE_COLO_URL: traces.url("main"), PROBE_BUDGET_USD: "1000000" };
  main = await startStack(mainVars, { host: "127.0.0.1", port: 0, resourcePersistencePath: persist });
});

after(async () => {
  await main?.dispose();
  for (const m of members) await m.dispose();
  for (const p of proxies) {
    p.server.closeAllConnections?.();
    p.server.close();
  }
  traces?.server.close();
  await stop(redis?.proc);
  fs.rmSync(persist, { recursive: true, force: true });
});

const auth = { Authorization: `Bearer ${TOKEN}` };
async function call(method, p) {
  const res = await main.dispatchFetch(`http://localhost${p}`, { method, headers: auth });
  return { status: res.status, text: await res.text() };
}
const lines = (text) => text.split("\n").filter(Boolean).map((l) => JSON.parse(l));

test("the probes call every member and keep every outcome under its label", { timeout: 300_000 }, async () => {
  const started = await call("POST", "/probes/start");
  assert.equal(started.status, 200, started.text);
  const list = JSON.parse(started.text).probes.map((p) => p.label);
  assert.deepEqual(list, ["weur", EAST, CENTRAL, "local-3", "busy", "moved", "endless", "big", "hang", "gone"]);

  // Until every member has a few answers kept.
  const deadline = Date.now() + 180_000;
  let kept = [];
  for (;;) {
    kept = lines((await call("GET", "/probes/answers")).text);
    const of = (label) => kept.filter((l) => l.label === label).length;
    if ([EAST, CENTRAL, "local-3", "busy", "moved", "endless", "gone"].every((l) => of(l) >= 3) && of("big") >= 12) break;
    assert.ok(Date.now() < deadline, `not every member answered in time: ${JSON.stringify(Object.fromEntries(["weur", EAST, CENTRAL, "local-3", "busy", "gone"].map((l) => [l, of(l)])))}`);
    await sleep(1000);
  }
  const stopped = await call("POST", "/probes/stop");
  assert.equal(stopped.status, 200, stopped.text);
  // Let a measurement that was running when the stop came finish and be kept.
  await sleep(5000);
  const text = (await call("GET", "/probes/answers")).text;
  assert.ok(!text.includes(TOKEN), "the token reached a kept line");
  kept = lines(text);
  const end = kept.pop();
  assert.equal(end.end, true, JSON.stringify(end));
  assert.equal(end.lines, kept.length);

  for (const p of proxies.filter((p) => p.counts)) {
    const mine = kept.filter((l) => l.label === p.label);
    // Every answer the member sent is kept, once: nothing lost, nothing doubled.
    assert.equal(mine.length, p.counts.answered, `${p.label}: kept ${mine.length}, member answered ${p.counts.answered}`);
    assert.equal(p.counts.requests, p.counts.answered, `${p.label}: a request went unanswered`);
    assert.deepEqual([...p.counts.tokens], [`Bearer ${TOKEN}`], `${p.label}: the probes did not send BENCH_TOKEN`);
    for (const l of mine) {
      assert.equal(l.vantage, "member");
      assert.equal(l.hint, null);
      // Both witnesses as they came, and what they make the answer against the label's metro.
      assert.equal(l.placement, p.placement, JSON.stringify(l));
      assert.equal(l.trace_colo, p.trace, JSON.stringify(l));
      assert.equal(l.placement_check, p.check, JSON.stringify(l));
      // cf-placement remote-IAD and a trace of NRT disagree; no header, or no trace, cannot.
      assert.equal(l.trace_disagrees, p.label === CENTRAL ? true : undefined, JSON.stringify(l));
      assert.equal(l.failure, undefined, JSON.stringify(l));
      // The member's own handler time (its Server-Timing), the probe's round trip apart: the
      // handler ran within the call.
      assertMs(l.call_ms, `call_ms of ${JSON.stringify(l)}`);
      assertMs(l.handler_ms, `handler_ms of ${JSON.stringify(l)}`);
      assert.ok(l.handler_ms <= l.call_ms + 1, `handler ${l.handler_ms} ms in a call of ${l.call_ms} ms`);
      assert.equal(typeof l.answer.stores.kv.read_ms, "number", JSON.stringify(l.answer));
      assert.equal(l.colo, l.answer.colo);
      // `do` measures the member's colo's own object (created near where it runs), and says so.
      assert.equal(l.answer.stores.do.near_colo, l.answer.colo, JSON.stringify(l.answer.stores.do));
      assert.equal(l.answer.stores.do.error, null, JSON.stringify(l.answer.stores.do));
    }
    // The first answer of a member's isolate is cold, the rest warm.
    assert.equal(mine[0].cold, true);
    assert.ok(mine.slice(1).every((l) => l.cold === false), p.label);
    const seqs = mine.map((l) => l.seq);
    assert.deepEqual(seqs, [...new Set(seqs)].sort((a, b) => a - b), `${p.label}: seq repeats or goes back`);
  }
  const busy = kept.filter((l) => l.label === "busy");
  assert.equal(busy.length, proxies.find((p) => p.label === "busy").server.count);
  for (const l of busy) {
    assert.deepEqual([l.failure.kind, l.failure.status], ["status", 503]);
    assert.ok(!l.failure.detail.includes("\u001b"), "a terminal escape reached a kept line");
    assert.equal(l.answer, undefined);
  }
  // Large answers: every one kept whole and streamed once, in order, across pages that end on
  // their byte bound (12 x 900 KB spans at least three pages).
  const big = kept.filter((l) => l.label === "big");
  assert.equal(big.length, proxies.find((p) => p.label === "big").server.count, "a large answer was lost or doubled");
  assert.deepEqual(big.map((l) => l.answer.n), big.map((_, i) => i + 1), "large answers out of order, lost or doubled at a page's end");
  for (const l of big) assert.equal(l.answer.pad.length, BIG_PAD);
  // The hanging member was asked (its probe is still waiting on it), and held up no one: every
  // other member kept its answers meanwhile (the loop above).
  assert.ok((proxies.find((p) => p.label === "hang").server.count ?? 0) >= 1, "the hanging member was never asked");
  // A redirect is a failure naming where it led, never followed.
  const moved = kept.filter((l) => l.label === "moved");
  for (const l of moved) {
    assert.deepEqual([l.failure.kind, l.failure.status], ["status", 302], JSON.stringify(l));
    assert.match(l.failure.detail, /a redirect to .*: not followed/);
  }
  assert.equal(proxies.find((p) => p.label === "elsewhere").server.count ?? 0, 0, "a redirect was followed");
  // A body without end: cut at the limit, a failure that names it.
  for (const l of kept.filter((l) => l.label === "endless")) {
    assert.equal(l.failure.kind, "malformed", JSON.stringify(l));
    assert.match(l.failure.detail, /over the 1024 KiB a member's answer may take/);
  }
  for (const l of kept.filter((l) => l.label === "gone")) {
    assert.equal(l.failure.kind, "connect", JSON.stringify(l));
  }
  // Each member's isolate asked the trace once (it is new once; the next ask is an hour away,
  // and a failed ask is not retried sooner); a member without the header is "unknown".
  for (const [label] of PLACED) assert.equal(traces.asked[label], 1, `${label} asked the trace ${traces.asked[label]} times`);
  for (const l of kept.filter((l) => l.label === "big")) assert.equal(l.trace_colo, "unknown", JSON.stringify({ ...l, answer: undefined }));
  // The hint probe goes on beside them, its colo its own trace's.
  const hints = kept.filter((l) => l.label === "weur" && l.vantage === "hint");
  assert.ok(hints.length > 0);
  for (const l of hints) {
    assert.equal(l.colo, "LHR", JSON.stringify(l));
    assert.equal(l.trace_colo, undefined, "a hint's colo is its trace: no second field");
  }
  assert.ok(traces.asked.main >= 1, "the hint probe never asked its trace");

  // GET /probes lists every vantage point with its last error.
  const probes = JSON.parse((await call("GET", "/probes")).text).probes;
  const gone = probes.find((p) => p.label === "gone");
  assert.equal(gone.vantage, "member");
  assert.match(gone.last_error, /member connect/);
  assert.match(probes.find((p) => p.label === "busy").last_error, /member answered 503/);
  // Each member's answers by placement, and why the ones outside its region are not counted.
  const of = (label) => probes.find((p) => p.label === label);
  const counted = (label) => kept.filter((l) => l.label === label).length;
  const none = { placed: 0, unplaced: 0, elsewhere: 0, trace_elsewhere: 0, trace_disagrees: 0 };
  assert.deepEqual(of(EAST).placement, { ...none, placed: counted(EAST), last: "remote-IAD", last_trace: "IAD" });
  assert.equal(of(EAST).last_error, null);
  assert.deepEqual(of(EAST).region.colos, ["IAD"]);
  assert.equal(of(EAST).region.probe_hint, "enam");
  assert.deepEqual(of(CENTRAL).placement, { ...none, trace_elsewhere: counted(CENTRAL), trace_disagrees: counted(CENTRAL), last: "remote-IAD", last_trace: "NRT" });
  assert.match(of(CENTRAL).last_error, /^ran elsewhere: Cloudflare's trace says NRT where aws:eu-central-1 expects FRA \(Frankfurt, Germany\) \(cf-placement remote-IAD\)/);
  assert.deepEqual(of("local-3").placement, { ...none, unplaced: counted("local-3"), last: null, last_trace: "unknown" });
  assert.match(of("local-3").last_error, /^unplaced: the answer has no cf-placement header and its trace says unknown/);
  // The report counts only the placed member's answers in its row, names the others, and says
  // what went wrong with the one whose trace is outside its region.
  const report = await call("GET", "/report?window=1h");
  assert.equal(report.status, 200, report.text.slice(0, 300));
  assert.match(report.text, new RegExp(`not counted: ${counted(CENTRAL)} trace elsewhere`));
  assert.match(report.text, new RegExp(`not counted: ${counted("local-3")} unplaced`));
  assert.match(report.text, new RegExp(`trace ${"NRT"} ${counted(CENTRAL)}; ${counted(CENTRAL)} disagree with cf-placement`));
  assert.match(report.text, new RegExp(`<li><b>${CENTRAL} trace_elsewhere</b>: ${counted(CENTRAL)} of ${counted(CENTRAL)} \\(100`));
  assert.match(report.text, new RegExp(`<li><b>${CENTRAL} trace_disagrees</b>: ${counted(CENTRAL)} of ${counted(CENTRAL)} `));
  assert.doesNotMatch(report.text, new RegExp(`<li><b>${EAST} trace_`), "the member in its region was named in What went wrong");
});

test("a member taken out of FLEET stops itself at its next wake", { timeout: 180_000 }, async () => {
  const local3 = proxies.find((p) => p.label === "local-3").counts;
  const calls = async (label, n, what) => {
    const deadline = Date.now() + 60_000;
    while (proxies.find((p) => p.label === label).counts.requests < n) {
      assert.ok(Date.now() < deadline, what);
      await sleep(250);
    }
  };
  // Running again, local-3 included.
  assert.equal((await call("POST", "/probes/start")).status, 200);
  await calls("local-3", local3.requests + 2, "local-3 was not called again after the start");
  // A new deploy of the main worker, its probe objects as they were, local-3 gone from FLEET.
  await main.dispose();
  const fleet = mainVars.FLEET.split(",").filter((m) => !m.startsWith("local-3=")).join(",");
  main = await startStack({ ...mainVars, FLEET: fleet }, { host: "127.0.0.1", port: 0, resourcePersistencePath: persist });
  // Still listed (the directory of members the starts armed), as outside FLEET.
  const listed = JSON.parse((await call("GET", "/probes")).text).probes;
  const outside = listed.find((p) => p.label === "local-3");
  assert.ok(outside, JSON.stringify(listed.map((p) => p.label)));
  assert.equal(outside.vantage, "member");
  assert.match(outside.outside, /no longer in FLEET/);
  // local-1 goes on (its alarm fires every second); local-3's probe, woken by its own alarm,
  // finds itself out of FLEET and stops without calling the member. A call that was on its way
  // when the old worker went is the most it may still make.
  const local1 = proxies.find((p) => p.label === EAST).counts;
  const after = local3.requests;
  await calls(EAST, local1.requests + 4, `${EAST} was not called after the restart`);
  // Its object says why it stopped (read from the namespace: GET /probes lists FLEET's members).
  const ns = await main.getDurableObjectNamespace("BENCH_PROBES");
  const status = async () => (await ns.get(ns.idFromName("member:local-3")).fetch("https://kvbench.probe/status")).json();
  const deadline = Date.now() + 30_000;
  let s;
  while (!(s = await status()).stopped) {
    assert.ok(Date.now() < deadline, `local-3's probe did not stop: ${JSON.stringify(s)}`);
    await sleep(500);
  }
  assert.match(s.last_error, /local-3 is no longer in FLEET/);
  assert.equal(s.running, false);
  assert.ok(local3.requests <= after + 1, `local-3 was called ${local3.requests - after} times after it left FLEET`);
  const settled = local3.requests;
  await sleep(3000);
  assert.equal(local3.requests, settled, "local-3 is still being called");
  // Stopped, its answers still kept: listed, and read with the others.
  const again = JSON.parse((await call("GET", "/probes")).text).probes.find((p) => p.label === "local-3");
  assert.equal(again?.stopped, true, JSON.stringify(again));
  assert.ok(again.kept > 0, JSON.stringify(again));
  const kept = (await call("GET", "/probes/answers")).text.split("\n").filter(Boolean).map((l) => JSON.parse(l));
  assert.equal(kept.filter((l) => l.label === "local-3").length, again.kept, "local-3's kept answers are streamed");
  assert.equal(kept.at(-1).lines, kept.length - 1, "the end line counts them");
  const stopped = JSON.parse((await call("POST", "/probes/stop")).text);
  assert.equal(stopped.probes.find((p) => p.label === "local-3")?.result?.stopped, true, JSON.stringify(stopped));
});
