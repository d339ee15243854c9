// What the benchmark leaves in the deployer's stores stays bounded, on Miniflare's real D1 and R2
// and the built worker: D1 has no TTL, so each write deletes up to 16 expired rows of other keys
// (the oldest first, through the expiry index) in the same batch; R2 has none either, so the Cron
// Trigger lists the `r2` store's namespace a bounded number of pages per tick, deletes the
// expired objects, keeps its place for the next tick, and never touches an object without the
// expiry field; and the cron's two jobs, the probes' tick and the sweep, never stop each other.
// Rows and objects are counted in the stores themselves. Run `npm run build` first.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker } from "./procs.mjs";

const CRON = { cron: "*/5 * * * *" };
const PREFIX = "kvbench:r2:";
const EXPIRES_AT = "expires-at-ms";
// The sweep's bounds (crates/core/src/stores/sweep.rs) and its place (src/stores/r2/sweep.rs).
const PAGES_PER_TICK = 10;
const PLACE = "kvbench-sweep/r2";

let mf;
before(async () => {
  // The cron also arms the hint probe, whose measurements use STORES: kv only, so nothing but
  // the tests themselves writes D1 rows or R2 objects here (the counts below are exact).
  mf = await startWorker({ STORES: "kv", PROBE_HINTS: "weur", PROBE_COLO_URL: "none" });
});
after(async () => {
  await mf?.dispose();
});

async function measure(worker, query) {
  const res = await worker.dispatchFetch(`http://localhost/test?${query}`);
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return JSON.parse(text);
}

/** Every key under `prefix` in the bucket. */
async function keys(bucket, prefix = PREFIX) {
  const out = [];
  let cursor;
  do {
    const page = await bucket.list({ prefix, cursor });
    out.push(...page.objects.map((o) => o.key));
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor);
  return out;
}

/** Puts `entries` ([key, customMetadata | undefined]) a few at a time. */
async function putAll(bucket, entries) {
  for (let i = 0; i < entries.length; i += 100) {
    await Promise.all(entries.slice(i, i + 100).map(([key, meta]) => bucket.put(key, "v", meta ? { customMetadata: meta } : {})));
  }
}

test("D1: each write deletes up to 16 expired rows of other keys, the oldest first, in the same batch; live rows stay", async () => {
  const db = await mf.getD1Database("BENCH_D1");
  const indexes = await db.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'kvbench'").all();
  assert.deepEqual(indexes.results.map((r) => r.name), ["kvbench_expires_at"], "the migration's expiry index");
  const insert = db.prepare("INSERT INTO kvbench (key, value, expires_at) VALUES (?1, 'v', ?2)");
  // 40 expired rows of other keys (the oldest first by expiry), one live, and the key about to
  // be written, itself expired.
  await db.batch([
    ...Array.from({ length: 40 }, (_, i) => insert.bind(`kvbench:d1:old-${String(i).padStart(2, "0")}`, 1000 + i)),
    insert.bind("kvbench:d1:live", Date.now() + 3_600_000),
    insert.bind("kvbench:d1:w1", 1),
  ]);
  const old = async () => (await db.prepare("SELECT key FROM kvbench WHERE key LIKE 'kvbench:d1:old-%' ORDER BY key").all()).results.map((r) => r.key);

  // A miss on an expired key: the row is overwritten (not deleted), and 16 others go.
  const first = await measure(mf, "stores=d1&key=w1&ttl=300");
  assert.equal(first.stores.d1.error, null, JSON.stringify(first.stores.d1));
  assert.equal(first.stores.d1.hit, false);
  const left = await old();
  assert.equal(left.length, 24);
  assert.equal(left[0], "kvbench:d1:old-16", "the oldest expired go first");
  assert.equal((await measure(mf, "stores=d1&key=w1")).stores.d1.hit, true, "the written row is there");
  // A hit writes nothing, so it deletes nothing.
  assert.equal((await old()).length, 24);
  // Two more writes of new keys: 16, then the last 8.
  await measure(mf, "stores=d1&key=w2&ttl=300");
  assert.equal((await old()).length, 8);
  await measure(mf, "stores=d1&key=w3&ttl=300");
  assert.deepEqual(await old(), []);
  const all = (await db.prepare("SELECT key FROM kvbench ORDER BY key").all()).results.map((r) => r.key);
  assert.deepEqual(all, ["kvbench:d1:live", "kvbench:d1:w1", "kvbench:d1:w2", "kvbench:d1:w3"]);
});

test("R2: the cron deletes expired objects a bounded number of pages per tick, resumes where it stopped, and never touches an object without the expiry field", async () => {
  const r2 = await mf.getR2Bucket("BENCH_R2");
  // How many objects R2 answers per page when asked for their metadata (R2 may answer fewer
  // than the 1,000 asked; Miniflare answers 100): a tick lists PAGES_PER_TICK such pages.
  await r2.put(`${PREFIX}probe-page`, "v", { customMetadata: { [EXPIRES_AT]: "1" } });
  const probePage = await r2.list({ prefix: PREFIX, include: ["customMetadata"], limit: 1000 });
  await r2.delete(`${PREFIX}probe-page`);
  const perPage = probePage.truncated ? probePage.objects.length : 100;
  const perTick = PAGES_PER_TICK * perPage;

  const future = String(Date.now() + 3_600_000);
  // Before the expired ones in key order, so the first tick's pages mix them in: a live one, one
  // without metadata, one with other metadata, one whose field is not a time.
  const kept = [
    [`${PREFIX}a-foreign`, undefined],
    [`${PREFIX}a-other-meta`, { owner: "someone" }],
    [`${PREFIX}a-unreadable`, { [EXPIRES_AT]: "tomorrow" }],
    [`${PREFIX}a-live`, { [EXPIRES_AT]: future }],
  ];
  const expired = Array.from({ length: perTick + 200 }, (_, i) => [`${PREFIX}old-${String(i).padStart(6, "0")}`, { [EXPIRES_AT]: String(1000 + i) }]);
  // Outside the namespace: never listed, whatever its metadata says.
  const outside = [["elsewhere/expired", { [EXPIRES_AT]: "1" }], ["unrelated", undefined]];
  await putAll(r2, [...kept, ...expired, ...outside]);

  const worker = await mf.getWorker();
  await worker.scheduled(CRON);
  // The first tick: PAGES_PER_TICK pages, the 4 kept objects among them; its place kept.
  let left = await keys(r2);
  assert.equal(left.length, kept.length + expired.length - (perTick - kept.length));
  for (const [key] of kept) assert.ok(left.includes(key), `${key} was deleted`);
  const place = await r2.head(PLACE);
  assert.ok(place, "the place is kept for the next tick");
  assert.equal(place.customMetadata.after, expired[perTick - kept.length - 1][0], "after the last key listed");

  // The second resumes there, reaches the end and forgets its place: every expired one is gone.
  await worker.scheduled(CRON);
  left = await keys(r2);
  assert.deepEqual(left.sort(), kept.map(([k]) => k).sort());
  assert.equal(await r2.head(PLACE), null, "the next tick starts from the first key");
  assert.deepEqual((await keys(r2, "")).sort(), ["elsewhere/expired", ...kept.map(([k]) => k), "unrelated"].sort(), "nothing outside the namespace touched");

  // Objects the benchmark writes are swept once they expire (the store's own writes).
  const answer = await measure(mf, "stores=r2&key=swept&ttl=1");
  assert.equal(answer.stores.r2.error, null, JSON.stringify(answer.stores.r2));
  const written = await r2.head(`${PREFIX}swept`);
  assert.ok(Number(written.customMetadata[EXPIRES_AT]) > 0);
  // Rewritten with an expiry in the past (waiting out the TTL would time the test).
  await r2.put(`${PREFIX}swept`, "v", { customMetadata: { [EXPIRES_AT]: String(Number(written.customMetadata[EXPIRES_AT]) - 2000) } });
  await worker.scheduled(CRON);
  assert.equal(await r2.head(`${PREFIX}swept`), null);
  assert.ok(await r2.head(`${PREFIX}a-live`));
});

test("the cron's two jobs stand apart: the sweep runs when the probes cannot, and the probes are armed without R2", async () => {
  // No probes' namespace: the probes' tick fails (logged); the sweep still deletes.
  const noProbes = await startWorker(
    { STORES: "r2", PROBE_COLO_URL: "none" },
    { durableObjects: { BENCH_DO: { className: "BenchObject", useSQLite: true }, BENCH_RUNS: { className: "RunArchive", useSQLite: true } } },
  );
  try {
    const r2 = await noProbes.getR2Bucket("BENCH_R2");
    await putAll(r2, [[`${PREFIX}gone`, { [EXPIRES_AT]: "1" }], [`${PREFIX}foreign`, undefined]]);
    const res = await noProbes.dispatchFetch("http://localhost/probes");
    assert.equal(res.status, 500, "the probes are not there");
    await res.text();
    await (await noProbes.getWorker()).scheduled(CRON);
    assert.deepEqual(await keys(r2), [`${PREFIX}foreign`]);
  } finally {
    await noProbes.dispose();
  }
  // No bucket: the sweep has nothing to do; the probes' tick arms the probe.
  const noR2 = await startWorker({ STORES: "kv", PROBE_HINTS: "weur", PROBE_EVERY: "3600", PROBE_COLO_URL: "none" }, { r2Buckets: [] });
  try {
    const before = await (await noR2.dispatchFetch("http://localhost/probes")).json();
    assert.equal(before.probes[0].running, false, JSON.stringify(before.probes[0]));
    await (await noR2.getWorker()).scheduled(CRON);
    const after = await (await noR2.dispatchFetch("http://localhost/probes")).json();
    assert.equal(after.probes[0].running, true, JSON.stringify(after.probes[0]));
    assert.equal((await noR2.dispatchFetch("http://localhost/probes/stop", { method: "POST" })).status, 200);
  } finally {
    await noR2.dispose();
  }
});
