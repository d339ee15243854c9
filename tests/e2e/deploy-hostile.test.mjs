// `npm run deploy` given what it must refuse, and an API that misbehaves, each bounded in time:
// a bad FLEET_REGIONS, BENCH_TOKEN or POSTGRES_URL stops the deploy before it builds, creates or
// uploads anything (the stand-in sees no request that changes the account — in fact none at all),
// with a message naming the variable, no stack trace, and no secret in the output; an upload the
// API never answers fails the deploy at its deadline naming the step; an account without a
// workers.dev subdomain fails it instead of printing a URL of "undefined"; scripts/postgres.sh
// refuses a URL it cannot parse without printing it, and a start that fails after its server
// started leaves no server running and no data behind.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { deploy, mutating, withApi } from "./deploy-run.mjs";
import { ROOT, freePort, sleep } from "./procs.mjs";

/** What a refused input must never produce: a Node stack trace. */
const noStack = (out) => assert.doesNotMatch(out, /\n\s+at .+:\d+:\d+\)?\n|node:internal|ERR_INVALID_URL/, `a stack trace:\n${out}`);

/** A deploy that must be refused before it touches the account. */
async function refused(env, { message, secrets = [] }) {
  return withApi("kvbench-deploy-hostile-", async (api, dir) => {
    const r = await deploy(api, dir, env, { timeoutMs: 60_000 });
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, message);
    assert.match(r.out, /the deploy's inputs are refused \(above\); nothing was built, created or uploaded/);
    assert.deepEqual(mutating(r.requests), [], "a mutating request before the inputs were checked");
    assert.equal(r.requests.length, 0, `the API was called: ${r.requests.map((x) => `${x.method} ${x.path}`)}`);
    noStack(r.out);
    for (const s of secrets) assert.ok(!r.out.includes(s), "a secret was printed");
    assert.ok(!fs.existsSync(path.join(dir, "kvbench.jsonc")), "resources were looked up");
    return r;
  });
}

test("FLEET_REGIONS unknown, duplicated, malformed or too many: refused naming FLEET_REGIONS, nothing touched", { timeout: 240_000 }, async () => {
  await refused({ FLEET_REGIONS: "aws:us-east-9" }, { message: /FLEET_REGIONS="aws:us-east-9": aws:us-east-9 is not in crates\/core\/fleet-regions\.json/ });
  await refused({ FLEET_REGIONS: "aws:us-east-1,aws:us-east-1" }, { message: /FLEET_REGIONS="aws:us-east-1,aws:us-east-1": aws:us-east-1 is listed twice/ });
  await refused({ FLEET_REGIONS: "-1" }, { message: /FLEET_REGIONS="-1": expected all, none, a count from 1 to \d+, or a comma list/ });
  await refused({ FLEET_REGIONS: "aws:us-east-1,,gcp:us-central1" }, { message: /FLEET_REGIONS="aws:us-east-1,,gcp:us-central1": expected all, none/ });
  await refused({ FLEET_REGIONS: "999" }, { message: /FLEET_REGIONS="999": a count is 1 to \d+/ });
});

test("BENCH_TOKEN a header cannot carry (whitespace anywhere, control, non-ASCII): refused, never rewritten or printed", { timeout: 240_000 }, async () => {
  const base = `tok-${crypto.randomBytes(12).toString("hex")}`;
  const cases = [
    [`${base.slice(0, 8)} ${base.slice(8)}`, /BENCH_TOKEN \(the environment\) has a space at character 9 of/],
    [`${base}\t`, /has a tab at character \d+/],
    [` ${base}`, /has a space at character 1 of/],
    [`${base.slice(0, 5)}\n${base.slice(5)}`, /has a line break at character 6/],
    [`${base}\x01`, /has a control character/],
    [`${base}é`, /has a non-ASCII character/],
  ];
  for (const [token, message] of cases) {
    await refused({ BENCH_TOKEN: token }, { message, secrets: [base, token.trim()] });
  }
  // The kept token, too: a file with a space inside is refused, not squeezed into another token.
  await withApi("kvbench-deploy-hostile-", async (api, dir) => {
    fs.writeFileSync(path.join(dir, "bench-token"), `${base.slice(0, 8)} ${base.slice(8)}\n`, { mode: 0o600 });
    const r = await deploy(api, dir, {}, { timeoutMs: 60_000 });
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, new RegExp(`BENCH_TOKEN \\(${dir.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}/bench-token\\) has a space at character 9`));
    assert.equal(r.requests.length, 0);
    assert.ok(!r.out.includes(base.slice(8)), "the token was printed");
  });
});

test("POSTGRES_URL that Node's parser refuses or misreads: refused naming POSTGRES_URL, the password never printed", { timeout: 240_000 }, async () => {
  const pw = `Pw${crypto.randomBytes(6).toString("hex")}`;
  const cases = [
    [`postgres://kvbench:${pw}/x@db.example.com:5432/kvbench`, /POSTGRES_URL is not a usable postgres:\/\/ URL \(its value is not shown.*Node's URL parser refuses it; a '\/', '#'/],
    [`postgres://kvbench:${pw}#x@db.example.com/kvbench`, /POSTGRES_URL is not a usable .*(Node's URL parser refuses it|'#' fragment)/],
    [`postgresql//kvbench:${pw}@db.example.com/kvbench`, /POSTGRES_URL is not a usable .*does not start with postgres:\/\/ or postgresql:\/\//],
    [`postgres://kvbench:12/${pw}@db.example.com/kvbench`, /POSTGRES_URL is not a usable .*its path has an '@'/],
    [`postgres://kvbench@db.example.com/kvbench`, /POSTGRES_URL is not a usable .*no password \(Hyperdrive needs one\)/],
    [`mysql://kvbench:${pw}@db.example.com/kvbench`, /does not start with postgres:\/\//],
  ];
  for (const [url, message] of cases) await refused({ POSTGRES_URL: url }, { message, secrets: [pw] });
});

test("scripts/postgres.sh migrate: a URL it cannot parse is refused naming the variable, never printed", () => {
  const pw = `Pw${crypto.randomBytes(6).toString("hex")}`;
  for (const url of [`postgres://u:${pw}/x@127.0.0.1:1/db`, `postgresql//u:${pw}@127.0.0.1/db`, `postgres://u:${pw}#x@127.0.0.1/db`]) {
    const r = spawnSync("bash", [path.join(ROOT, "scripts/postgres.sh"), "migrate", url], { encoding: "utf8", timeout: 30_000 });
    assert.equal(r.status, 2, `${r.stdout}${r.stderr}`);
    assert.match(r.stderr, /POSTGRES_URL is not a usable postgres:\/\/ URL \(its value is not shown/);
    assert.ok(!`${r.stdout}${r.stderr}`.includes(pw), "the password was printed");
    noStack(r.stderr);
  }
});

test("an API that never answers the first upload: the deploy fails at the step's deadline, naming it", { timeout: 20 * 60_000 }, async () => {
  await withApi("kvbench-deploy-hang-", async (api, dir) => {
    api.failOn("PUT", /\/workers\/scripts\/kvbench-report$/, { hang: true, times: 1000 });
    const r = await deploy(api, dir, { KVBENCH_STEP_TIMEOUT_S: "10" }, { timeoutMs: 10 * 60_000 });
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /deploying the report worker: no answer within 10 s \(KVBENCH_STEP_TIMEOUT_S\); stopped it/);
    assert.ok(r.requests.some((x) => x.status === "hung"), "the upload reached the stand-in");
    assert.ok(!api.state.scripts.has("kvbench"), "the deploy went on after the step that hung");
    assert.doesNotMatch(r.out, /\[test\] killed/);
  });
});

test("an account without a workers.dev subdomain: the deploy fails, no URL of 'undefined' printed as deployed", { timeout: 20 * 60_000 }, async () => {
  await withApi(
    "kvbench-deploy-nosub-",
    async (api, dir) => {
      const r = await deploy(api, dir, {}, { timeoutMs: 10 * 60_000 });
      assert.notEqual(r.code, 0, r.out);
      assert.doesNotMatch(r.out, /deployed: https:\/\/kvbench\.(undefined|null)\.workers\.dev/);
      assert.match(r.out, /(the API gave no workers\.dev subdomain for the account|register a workers\.dev subdomain|printed no workers\.dev URL)/i);
    },
    { subdomain: null },
  );
});

test("scripts/postgres.sh start: a step that fails after the server started stops it and removes its data", { timeout: 120_000 }, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-pg-trap-"));
  const fakeBin = path.join(dir, "bin");
  fs.mkdirSync(fakeBin);
  // A psql that fails: the server is up by the time start() first runs it (CREATE DATABASE).
  fs.writeFileSync(path.join(fakeBin, "psql"), "#!/bin/sh\necho 'psql: error: injected by the test' >&2\nexit 2\n", { mode: 0o755 });
  // Its data directory goes under a root of this test's own (another run's servers may be
  // starting in /tmp at the same time), which the server's user can reach.
  const root = path.join(dir, "data-root");
  fs.mkdirSync(root, { mode: 0o755 });
  fs.chmodSync(dir, 0o755);
  const port = await freePort();
  const r = spawnSync("bash", [path.join(ROOT, "scripts/postgres.sh"), "start", path.join(dir, "state"), String(port), "trap-test-password"], {
    encoding: "utf8",
    timeout: 90_000,
    env: { ...process.env, PATH: `${fakeBin}:${process.env.PATH}`, KVBENCH_PG_DATA_ROOT: root },
  });
  try {
    assert.notEqual(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stderr, /CREATE DATABASE kvbench failed/);
    const made = fs.readdirSync(root);
    assert.deepEqual(made, [], "the failed start left its data directory");
    // Nothing listens on its port, and no postgres process runs on a data directory it made.
    await sleep(200);
    const listening = spawnSync("bash", ["-c", `exec 3<>/dev/tcp/127.0.0.1/${port}`]).status === 0;
    assert.equal(listening, false, `a server still listens on ${port}`);
    assert.ok(!fs.existsSync(path.join(dir, "state/postgres.pid")));
  } finally {
    // Should the trap have failed, stop what it left (by its recorded PID) before failing.
    spawnSync("bash", [path.join(ROOT, "scripts/postgres.sh"), "stop", path.join(dir, "state")]);
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
