// The postgres store over TLS, locally: the private PostgreSQL (scripts/postgres.sh) with a
// server certificate from a test CA, and TLS required by its pg_hba.conf (`hostssl` only), the
// worker in Miniflare trusting that CA the way a user's local runtime would: Miniflare hands the
// certificates of NODE_EXTRA_CA_CERTS to workerd's outbound network when it loads, so this file
// sets it before the first worker starts (each test file runs in its own process). Deployed, the
// runtime trusts the public CAs a managed database's certificate chains to; here the chain is
// ours. Shown: `sslmode=require` reads and writes through `startTls()`; `sslmode=disable` is
// refused by the server (so the first really was TLS); a certificate that does not name the host
// is refused by the worker (the handshake checks the name, not only the chain).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { startPostgres, startWorker, assertMs } from "./procs.mjs";

const PASSWORD = `e2e-pg-tls-${crypto.randomBytes(8).toString("hex")}`;
let pg;
let dir; // the server's, where the certificates are made
let url; // sslmode=disable, as scripts/postgres.sh prints it
let mf;
const bodies = [];

const openssl = (...args) => execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
const psql = (sql) =>
  execFileSync("psql", ["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", url.replace("sslmode=disable", "sslmode=require"), "-c", sql], {
    encoding: "utf8",
  }).trim();

/** A key and a certificate for `san` signed by the CA `ca` (files `<name>.key`, `<name>.crt`). */
function issue(name, ca, san) {
  openssl("req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=${name}`);
  fs.writeFileSync(path.join(dir, `${name}.ext`), `subjectAltName=${san}\n`);
  openssl("x509", "-req", "-in", `${name}.csr`, "-CA", `${ca}.crt`, "-CAkey", `${ca}.key`, "-CAcreateserial", "-days", "2", "-out", `${name}.crt`, "-extfile", `${name}.ext`);
}

/** Installs `name`'s certificate and key as the server's and reloads its configuration. */
function serve(name, data) {
  for (const [from, to, mode] of [[`${name}.crt`, "server.crt", 0o644], [`${name}.key`, "server.key", 0o600]]) {
    const target = path.join(data, to);
    fs.copyFileSync(path.join(dir, from), target);
    fs.chmodSync(target, mode);
    if (process.getuid?.() === 0) execFileSync("chown", ["postgres", target]);
  }
}

before(async () => {
  pg = await startPostgres(PASSWORD, "kvbench-pg-tls-e2e-");
  ({ dir, url } = pg);
  // A CA, a certificate for 127.0.0.1 from it, and one for another name.
  openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=kvbench e2e CA");
  issue("ip", "ca", "IP:127.0.0.1");
  issue("other", "ca", "DNS:db.example.com");
  serve("ip", pg.data);
  // TLS only, from now on: a plain connection finds no pg_hba.conf line.
  fs.writeFileSync(path.join(pg.data, "pg_hba.conf"), "hostssl all all 127.0.0.1/32 scram-sha-256\n");
  execFileSync("psql", ["-X", "-q", url, "-c", "ALTER SYSTEM SET ssl = on", "-c", "SELECT pg_reload_conf()"]);
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(psql("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"), "t");
  // Before Miniflare loads: the CA it gives workerd to trust.
  process.env.NODE_EXTRA_CA_CERTS = path.join(dir, "ca.crt");
  mf = await startWorker({ POSTGRES_URL: url.replace("sslmode=disable", "sslmode=require"), STORES: "postgres" });
});

after(async () => {
  await mf?.dispose();
  pg?.stop();
  for (const body of bodies) assert.ok(!body.includes(PASSWORD), `the Postgres password leaked: ${body}`);
});

async function measure(worker, key) {
  const res = await worker.dispatchFetch(`http://localhost/test?key=${key}&min_bytes=4096&max_bytes=4096`);
  const text = await res.text();
  bodies.push(text);
  assert.equal(res.status, 200, text);
  return JSON.parse(text).stores.postgres;
}

test("sslmode=require: a miss, its write and a hit over TLS, the server's certificate checked against the trusted CA", async () => {
  const key = `tls-${crypto.randomBytes(4).toString("hex")}`;
  const first = await measure(mf, key);
  assert.equal(first.error, null, JSON.stringify(first));
  assert.equal(first.hit, false);
  assertMs(first.connect_ms, "the TLS handshake and authentication are connect_ms");
  const second = await measure(mf, key);
  assert.equal(second.error, null, JSON.stringify(second));
  assert.equal(second.hit, true);
  assert.equal(second.value_bytes, 4096);
  assert.equal(psql(`SELECT length(v) FROM kvbench_values WHERE k = 'kvbench:postgres:${key}'`), "4096");
});

test("without TLS the same server refuses the worker (so the reads above were over TLS); a certificate for another name is refused by the worker", async () => {
  const plain = await startWorker({ POSTGRES_URL: url, STORES: "postgres" });
  try {
    const pg = await measure(plain, "tls-plain");
    assert.equal(pg.error?.kind, "auth", JSON.stringify(pg));
    assert.match(pg.error.message, /28000|pg_hba|no encryption/, JSON.stringify(pg));
  } finally {
    await plain.dispose();
  }
  serve("other", pg.data);
  execFileSync("psql", ["-X", "-q", url.replace("sslmode=disable", "sslmode=require"), "-c", "SELECT pg_reload_conf()"]);
  await new Promise((r) => setTimeout(r, 500));
  try {
    const pg = await measure(mf, "tls-other-name");
    // workerd says only "internal error" to the worker (the reason, "IP address mismatch", is in
    // its own log): the store names what that means.
    assert.equal(pg.error?.kind, "connect", JSON.stringify(pg));
    assert.match(pg.error.message, /over TLS .*does not trust the server's certificate or the certificate does not name 127\.0\.0\.1/, JSON.stringify(pg));
  } finally {
    serve("ip", pg.data);
    execFileSync("psql", ["-X", "-q", url.replace("sslmode=disable", "sslmode=require"), "-c", "SELECT pg_reload_conf()"]);
  }
});
