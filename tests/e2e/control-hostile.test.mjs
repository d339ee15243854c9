// The control plane under abuse, against both workers under Miniflare, bounded in count and time:
// hundreds of starts and stops racing each other end consistent (after a last stop nothing runs,
// after a last start everything does, at the start's interval); a thousand run ids, each kept
// under its own id and nowhere else; 20 readers of /probes/answers at once each get the whole,
// well-formed stream. Run `npm run build` first (scripts/test.sh does).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startStack } from "./procs.mjs";

const HINTS = ["weur", "enam", "apac"];
const RACERS = 300;
const RUN_IDS = 1000;
const READERS = 20;
let mf;

before(async () => {
  mf = await startStack(
    {
      STORES: "kv",
      PROBE_HINTS: HINTS.join(","),
      PROBE_EVERY: "2",
      PROBE_COLO_URL: "none",
      BENCH_OPEN: "true",
      PROBE_BUDGET_USD: "1000000",
      RUN_SHARDS: "2",
    },
    { host: "127.0.0.1", port: 0 },
  );
});
after(async () => {
  await mf?.dispose();
});

async function call(method, p) {
  const res = await mf.dispatchFetch(`http://localhost${p}`, { method });
  return { status: res.status, text: await res.text() };
}
const probes = async () => JSON.parse((await call("GET", "/probes")).text).probes;

/** `n` calls of `fn(i)`, at most `width` at a time. */
async function pool(n, width, fn) {
  let next = 0;
  const out = new Array(n);
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < n) {
        const i = next++;
        out[i] = await fn(i);
      }
    }),
  );
  return out;
}

test(`${RACERS} starts and stops racing each other end consistent`, { timeout: 180_000 }, async () => {
  const answers = await pool(RACERS, 50, (i) => call("POST", i % 2 ? "/probes/stop" : `/probes/start?every=${2 + (i % 7)}`));
  for (const a of answers) assert.equal(a.status, 200, a.text);
  assert.equal((await call("POST", "/probes/stop")).status, 200);
  for (const p of await probes()) {
    assert.equal(p.stopped, true, JSON.stringify(p));
    assert.equal(p.running, false, JSON.stringify(p));
  }
  const started = await call("POST", "/probes/start?every=60");
  assert.equal(started.status, 200, started.text);
  const list = await probes();
  assert.deepEqual(list.map((p) => p.label).sort(), [...HINTS].sort());
  for (const p of list) {
    assert.equal(p.running, true, JSON.stringify(p));
    assert.equal(p.every_s, 60, JSON.stringify(p));
  }
  assert.equal((await call("POST", "/probes/stop")).status, 200);
});

test(`${RUN_IDS} run ids: each answer kept under its own id, and nowhere else`, { timeout: 300_000 }, async () => {
  const prefix = `many-${Date.now()}`;
  const sent = await pool(RUN_IDS, 20, async (i) => {
    const r = await call("GET", `/test?stores=kv&key=${i % 50}&run=${prefix}-${i}`);
    assert.equal(r.status, 200, r.text);
    return JSON.parse(r.text);
  });
  // Every id holds exactly its one answer (kept after the response: read until it is there).
  const deadline = Date.now() + 120_000;
  await pool(RUN_IDS, 20, async (i) => {
    for (;;) {
      const r = await call("GET", `/runs/${prefix}-${i}/answers`);
      const lines = r.status === 200 ? r.text.split("\n").filter(Boolean).map((l) => JSON.parse(l)) : [];
      if (lines.length === 2) {
        assert.deepEqual(lines[1], { end: true, lines: 1, keep_failed: 0 });
        assert.equal(lines[0].answer.key, sent[i].key, `run ${i}: another request's answer`);
        assert.equal(lines[0].answer.stores.kv.read_ms, sent[i].stores.kv.read_ms);
        return;
      }
      assert.ok(lines.length < 2, `run ${i}: ${r.text}`);
      assert.ok(Date.now() < deadline, `run ${i} not kept in time: ${r.status} ${r.text}`);
      await new Promise((ok) => setTimeout(ok, 200));
    }
  });
});

test(`${READERS} readers of /probes/answers at once each get the whole, well-formed stream`, { timeout: 180_000 }, async () => {
  assert.equal((await call("POST", "/probes/start?every=2")).status, 200);
  // A few answers to read.
  const deadline = Date.now() + 60_000;
  while ((await probes()).reduce((n, p) => n + (p.kept ?? 0), 0) < 12) {
    assert.ok(Date.now() < deadline, "the probes kept too little in time");
    await new Promise((ok) => setTimeout(ok, 500));
  }
  assert.equal((await call("POST", "/probes/stop")).status, 200);
  // Stopped: what is kept no longer changes while the readers read.
  await new Promise((ok) => setTimeout(ok, 3000));
  const reads = await Promise.all(Array.from({ length: READERS }, () => call("GET", "/probes/answers")));
  const first = reads[0];
  assert.equal(first.status, 200);
  for (const r of reads) {
    assert.equal(r.status, 200);
    const lines = r.text.split("\n").filter(Boolean).map((l) => JSON.parse(l));
    const end = lines.pop();
    assert.deepEqual(end, { end: true, lines: lines.length, keep_failed: 0 });
    assert.ok(lines.length >= 12);
    assert.equal(r.text, first.text, "two readers saw different streams");
  }
});
