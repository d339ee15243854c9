// The postgres and hyperdrive stores end to end: a real PostgreSQL server (scripts/postgres.sh,
// as the stack starts it: private data dir, SCRAM password, the migration applied), the worker in
// Miniflare with POSTGRES_URL and the local Hyperdrive binding pointed at the same database.
// Miss → write → hit at exact sizes, the same bytes as every other store (checked by the server's
// md5), errors by kind that leave the other stores' measurements alone, and no password in any
// answer. Run `npm run build` first (scripts/test.sh does).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import crypto from "node:crypto";
import net from "node:net";
import { freePort, startPostgres, startWorker, assertMs } from "./procs.mjs";

const PASSWORD = `e2e-pg-${crypto.randomBytes(8).toString("hex")}`;
const LOCAL_HYPERDRIVE = "CLOUDFLARE_HYPERDRIVE_LOCAL_CONNECTION_STRING_BENCH_HYPERDRIVE";
const bodies = [];
let pg;
let url;
let mf;

before(async () => {
  pg = await startPostgres(PASSWORD);
  url = pg.url;
  mf = await startWorker({ POSTGRES_URL: url, [LOCAL_HYPERDRIVE]: url, STORES: "kv,postgres,hyperdrive" });
});

after(async () => {
  await mf?.dispose();
  pg?.stop();
  for (const body of bodies) assert.ok(!body.includes(PASSWORD), `the Postgres password leaked: ${body}`);
});

async function get(worker, p) {
  const res = await worker.dispatchFetch(`http://localhost${p}`);
  const text = await res.text();
  bodies.push(text);
  return { status: res.status, json: JSON.parse(text) };
}

/** One query through psql (another client): its unaligned rows. */
const psql = (sql) => execFileSync("psql", ["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", url, "-c", sql], { encoding: "utf8" }).trim();
const md5 = (text) => crypto.createHash("md5").update(text).digest("hex");

test("GET / describes both stores, configured", async () => {
  const { json } = await get(mf, "/");
  assert.equal(json.stores.postgres.configured, true, JSON.stringify(json.stores.postgres));
  assert.equal(json.stores.hyperdrive.configured, true, JSON.stringify(json.stores.hyperdrive));
  assert.equal(json.stores.postgres.key_namespace, "kvbench:postgres:");
  assert.equal(json.stores.hyperdrive.key_namespace, "kvbench:hyperdrive:");
  assert.deepEqual(json.stores.hyperdrive.billing.read, [{ unit: "Hyperdrive query", count: { each: 1 } }]);
  assert.deepEqual(json.defaults.stores, ["kv", "postgres", "hyperdrive"]);
});

test("miss → write → hit at exact sizes, the bytes every store got, under each store's namespace", async () => {
  for (const bytes of [1, 4096, 65536, 1048576]) {
    const key = `e2e-size-${bytes}`;
    const q = `/test?key=${key}&min_bytes=${bytes}&max_bytes=${bytes}&ttl=120`;
    const first = (await get(mf, q)).json;
    for (const name of ["kv", "postgres", "hyperdrive"]) {
      const s = first.stores[name];
      assert.equal(s.error, null, `${bytes} ${name}: ${JSON.stringify(s.error)}`);
      assert.equal(s.hit, false, `${bytes} ${name}`);
      assert.equal(s.value_bytes, bytes, `${bytes} ${name}`);
    }
    for (const name of ["postgres", "hyperdrive"]) {
      assertMs(first.stores[name].connect_ms, `${name}: connecting and authenticating is connect_ms`);
      assertMs(first.stores[name].write_ms, `${name} write_ms`);
    }
    const kv = await (await mf.getKVNamespace("BENCH_KV")).get(key);
    assert.equal(kv.length, bytes);
    for (const ns of ["kvbench:postgres:", "kvbench:hyperdrive:"]) {
      const [len, sum, ttl] = psql(
        `SELECT octet_length(v), md5(v), round(extract(epoch FROM expires_at - now())) FROM kvbench_values WHERE k = '${ns}${key}'`,
      ).split("|");
      assert.equal(Number(len), bytes, `${ns}${key}`);
      assert.equal(sum, md5(kv), `${ns}${key}: the same bytes as KV's`);
      assert.ok(Number(ttl) > 110 && Number(ttl) <= 120, `${ns}${key} expires in ${ttl} s`);
    }
    const again = (await get(mf, q)).json;
    for (const name of ["postgres", "hyperdrive"]) {
      const s = again.stores[name];
      assert.equal(s.error, null, `${name}: ${JSON.stringify(s.error)}`);
      assert.equal(s.hit, true, `${bytes} ${name}: a hit`);
      assert.equal(s.value_bytes, bytes, `${bytes} ${name}`);
      assert.equal(s.write_ms, null, name);
    }
  }
});

test("an expired row is a miss, and the next write replaces it", async () => {
  const key = "e2e-expired";
  psql(`INSERT INTO kvbench_values VALUES ('kvbench:postgres:${key}', 'old', now() - interval '1 s')`);
  const { json } = await get(mf, `/test?key=${key}&stores=postgres`);
  assert.equal(json.stores.postgres.hit, false);
  assert.equal(json.stores.postgres.error, null);
  assert.equal(psql(`SELECT octet_length(v) > 3 FROM kvbench_values WHERE k = 'kvbench:postgres:${key}'`), "t");
});

test("a wrong password, nobody listening, a server that is not Postgres, no table: each an error of its store alone", async () => {
  const port = new URL(url).port;
  const silent = net.createServer((s) => s.end("HTTP/1.1 400 Bad Request\r\n\r\n")).listen(0, "127.0.0.1");
  await new Promise((r) => silent.once("listening", r));
  const cases = [
    [`postgres://kvbench:wrong-${PASSWORD}@127.0.0.1:${port}/kvbench?sslmode=disable`, "auth", /28P01/],
    [`postgres://kvbench:${PASSWORD}@127.0.0.1:${await freePort()}/kvbench?sslmode=disable`, "connect", /./],
    [`postgres://kvbench:${PASSWORD}@127.0.0.1:${silent.address().port}/kvbench?sslmode=disable`, "protocol", /not PostgreSQL/],
    [`postgres://kvbench:${PASSWORD}@127.0.0.1:${port}/postgres?sslmode=disable`, "not_configured", /migrations\/postgres/],
  ];
  try {
    for (const [bad, kind, message] of cases) {
      const worker = await startWorker({ POSTGRES_URL: bad, STORES: "kv,postgres" });
      try {
        const { status, json } = await get(worker, "/test?key=e2e-bad");
        assert.equal(status, 200);
        assert.equal(json.stores.postgres.error?.kind, kind, JSON.stringify(json.stores.postgres));
        assert.match(json.stores.postgres.error.message, message);
        assert.equal(json.stores.kv.error, null, "KV measured as ever");
        assert.equal(typeof json.stores.kv.read_ms, "number");
        assert.ok(!JSON.stringify(json).includes("wrong-"), "no password in the answer");
      } finally {
        await worker.dispose();
      }
    }
  } finally {
    silent.close();
  }
});

test("a non-ASCII password: SCRAM with SASLprep by the runtime's NFKC, as the server prepared it", async () => {
  // SASLprep maps U+2168 (ROMAN NUMERAL NINE) to "IX", U+FB01 (the fi ligature) to "fi" and
  // U+00A0 to a space, and keeps "ä": the server derived its keys from the prepared form, so
  // both spellings authenticate and a third password does not.
  const secret = crypto.randomBytes(6).toString("hex");
  const given = `\u2168-p\u00e4ss\u00a0w\u00f6rd-\ufb01-${secret}`;
  const prepared = `IX-p\u00e4ss w\u00f6rd-fi-${secret}`;
  psql(`CREATE ROLE kvbench_nfkc LOGIN PASSWORD '${given}'`);
  psql("GRANT SELECT, INSERT, UPDATE, DELETE ON kvbench_values TO kvbench_nfkc");
  const port = new URL(url).port;
  const as = (password) => `postgres://kvbench_nfkc:${encodeURIComponent(password)}@127.0.0.1:${port}/kvbench?sslmode=disable`;
  try {
    for (const [password, kind] of [[given, null], [prepared, null], [`${prepared}x`, "auth"]]) {
      const worker = await startWorker({ POSTGRES_URL: as(password), STORES: "postgres" });
      try {
        const res = await worker.dispatchFetch("http://localhost/test?key=e2e-nfkc");
        const text = await res.text();
        assert.ok(!text.includes(secret), "no password in the answer");
        const pg = JSON.parse(text).stores.postgres;
        assert.equal(pg.error?.kind ?? null, kind, `${JSON.stringify(password)}: ${JSON.stringify(pg.error)}`);
        if (kind === null) assert.equal(typeof pg.read_ms, "number");
      } finally {
        await worker.dispose();
      }
    }
  } finally {
    psql("DROP OWNED BY kvbench_nfkc; DROP ROLE kvbench_nfkc");
  }
});

test("without POSTGRES_URL or the binding, both stores are not_configured with the reason", async () => {
  const worker = await startWorker({ STORES: "kv,postgres,hyperdrive" });
  try {
    const { json } = await get(worker, "/test?key=e2e-none");
    assert.equal(json.stores.postgres.error.kind, "not_configured");
    assert.match(json.stores.postgres.error.message, /POSTGRES_URL is not set/);
    assert.equal(json.stores.hyperdrive.error.kind, "not_configured");
    assert.match(json.stores.hyperdrive.error.message, /BENCH_HYPERDRIVE/);
    assert.equal(json.stores.kv.error, null);
  } finally {
    await worker.dispose();
  }
});
