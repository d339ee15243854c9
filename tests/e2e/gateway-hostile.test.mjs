// The gateway binary under hostile and careless clients, replayed from issue 9: admin commands,
// a Lua busy loop, idle and slowloris connections (bounded counts and times), a pipeline whose
// answer would be hundreds of MB (the gateway's memory is checked), binary values, a blank token;
// plus the local stack's secrets and inspector. Every bound is generous or a lower bound.
// Run from the repo root: node --test tests/e2e/gateway-hostile.test.mjs
// Env: GATEWAY_BIN (default target/debug/upstash-gateway), REDIS_SERVER_BIN (default redis-server).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync, chmodSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import {
  ROOT, GATEWAY_BIN, REDIS_SERVER_BIN, start, stop, sleep, freePort, waitUntil, redisPing, startGateway, peakRssMiB, resetPeakRss,
} from "./procs.mjs";

const TOKEN = "hostile-e2e-token-" + process.pid;
const GENEROUS_MS = 10_000;
let redis, gateway;

/** A redis-server that answers BUSY (and takes SCRIPT KILL) 100 ms into a script. */
async function startScriptRedis() {
  const port = await freePort();
  const proc = start(REDIS_SERVER_BIN, [
    "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
    "--busy-reply-threshold", "100",
  ]);
  await waitUntil(proc, `redis-server (${REDIS_SERVER_BIN})`, 200, () => redisPing(port));
  return { proc, port };
}

before(async () => {
  redis = await startScriptRedis();
  // Short timeouts only where a test needs them: a client that keeps connections alive longer
  // than the server's idle timeout races its close (true of any server), so the shared gateway
  // keeps the default idle timeout.
  gateway = await startGateway(redis.port, TOKEN, ["--script-timeout-ms", "300"]);
});
after(async () => {
  await stop(gateway?.proc);
  await stop(redis?.proc);
});

async function command(body, { route = "/", headers = {} } = {}) {
  const res = await fetch(gateway.url + route, {
    method: "POST",
    headers: { Authorization: `Bearer ${TOKEN}`, ...headers },
    body: typeof body === "string" || body instanceof Uint8Array ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(GENEROUS_MS),
  });
  return { status: res.status, body: await res.json() };
}

function within(ms, promise, what) {
  return Promise.race([
    promise,
    sleep(ms).then(() => { throw new Error(`${what}: not done within ${ms} ms`); }),
  ]);
}

test("admin and connection-state commands are a 400 and change nothing", async () => {
  for (const cmd of [
    ["REPLICAOF", "127.0.0.1", 1], ["CONFIG", "SET", "maxmemory", "1"], ["ACL", "SETUSER", "default", "off"],
    ["SHUTDOWN", "NOSAVE"], ["SAVE"], ["DEBUG", "SLEEP", 5], ["MONITOR"], ["CLIENT", "KILL", "TYPE", "normal"],
    ["CLIENT", "PAUSE", 20000],
  ]) {
    const { status, body } = await command(cmd);
    assert.equal(status, 400, JSON.stringify(cmd));
    assert.match(body.error, new RegExp(`^ERR command is not allowed: ${cmd[0]}`));
  }
  assert.deepEqual(await command(["SET", "still", "writable"]), { status: 200, body: { result: "OK" } });
  assert.deepEqual(await command(["GET", "still"]), { status: 200, body: { result: "writable" } });
});

test("a Lua busy loop is stopped at the limit and other clients are served meanwhile", async () => {
  const started = Date.now();
  const loop = command(["EVAL", "while true do end", 0]);
  await sleep(150);
  const other = await within(GENEROUS_MS, command(["PING"]), "PING during the loop");
  // Redis refuses it BUSY while the script runs; the gateway sends it again once the script is
  // stopped, so the client gets its answer, not the BUSY.
  assert.deepEqual(other, { status: 200, body: { result: "PONG" } });
  const looped = await within(GENEROUS_MS, loop, "the looping EVAL");
  assert.equal(looped.status, 400);
  assert.match(looped.body.error, /killed.*--script-timeout-ms/);
  assert.ok(Date.now() - started >= 300);
  assert.deepEqual(await command(["ECHO", "after"]), { status: 200, body: { result: "after" } });
});

/** Resolves true when the server closes the socket (end or reset) within `ms`. */
function closedWithin(sock, ms) {
  return new Promise((resolve) => {
    if (sock.destroyed || sock.readableEnded) return resolve(true);
    const timer = setTimeout(() => resolve(false), ms);
    const done = () => { clearTimeout(timer); resolve(true); };
    sock.once("end", done);
    sock.once("close", done);
    sock.once("error", done);
    sock.resume();
  });
}

/** One request on a new connection (Connection: close); resolves to the whole response. */
async function rawRequest(port, path) {
  const sock = await connect(port);
  sock.write(`GET ${path} HTTP/1.1\r\nHost: g\r\nAuthorization: Bearer ${TOKEN}\r\nConnection: close\r\n\r\n`);
  let text = "";
  sock.setEncoding("utf8");
  sock.on("data", (d) => (text += d));
  await new Promise((resolve) => sock.once("close", resolve));
  return text;
}

function connect(port) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, "127.0.0.1", () => resolve(sock));
    sock.once("error", reject);
  });
}

test("idle and slowloris connections are closed; a fresh client is served", async (t) => {
  const tight = await startGateway(redis.port, TOKEN, [
    "--idle-timeout-ms", "500",
    "--header-read-timeout-ms", "500",
    "--max-connections", "100",
  ]);
  t.after(() => stop(tight.proc));
  const port = Number(new URL(tight.url).port);
  const idle = [];
  // 200 idle connections against a cap of 100: the oldest are shed, the rest time out.
  for (let i = 0; i < 200; i++) {
    const sock = await connect(port).catch(() => null);
    if (sock) { sock.on("error", () => {}); idle.push(sock); }
  }
  const slow = [];
  for (let i = 0; i < 20; i++) {
    const sock = await connect(port);
    sock.on("error", () => {});
    slow.push(sock);
  }
  // One header byte every 100 ms, at most 40 of them (4 s).
  const head = "GET /ping HTTP/1.1\r\nHost: g\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  const dripping = slow.map(async (sock) => {
    for (let i = 0; i < 40 && !sock.destroyed; i++) {
      sock.write(head[i]);
      await sleep(100);
    }
  });
  // A fresh connection (not one from fetch's pool, which the tight gateway may be closing).
  const fresh = await within(GENEROUS_MS, rawRequest(port, "/echo/fresh"), "a fresh client");
  assert.match(fresh, /^HTTP\/1\.1 200/);
  assert.ok(fresh.endsWith('{"result":"fresh"}'), fresh);

  const closed = await Promise.all([...idle, ...slow].map((s) => closedWithin(s, GENEROUS_MS)));
  assert.equal(closed.filter((c) => !c).length, 0, "connections left open");
  await Promise.all(dripping);
});

test("a pipeline whose answer would be 300 MB is a 400 and memory stays bounded", { skip: os.platform() !== "linux" }, async (t) => {
  const value = Buffer.alloc(5 * 1024 * 1024, 0x61);
  const set = await fetch(`${gateway.url}/set/big5`, {
    method: "POST", headers: { Authorization: `Bearer ${TOKEN}` }, body: value,
  });
  assert.equal(set.status, 200);
  const gets = Array.from({ length: 60 }, () => ["GET", "big5"]);
  resetPeakRss(gateway.proc.pid);
  for (let round = 0; round < 3; round++) {
    const { status, body } = await command(gets, { route: "/pipeline" });
    assert.equal(status, 400);
    assert.match(body.error, /^ERR max response size exceeded/);
  }
  // The default cap is 10 MB: the gateway's memory may grow by a few times that, not by 300 MB.
  const rss = peakRssMiB(gateway.proc.pid);
  t.diagnostic(`gateway peak RSS over 3 refused 300 MB pipelines: ${rss.toFixed(0)} MiB`);
  assert.ok(rss < 150, `gateway RSS ${rss.toFixed(0)} MiB`);
  const one = await command(["STRLEN", "big5"]);
  assert.deepEqual(one, { status: 200, body: { result: value.length } });
});

test("binary values round-trip exactly through base64", async () => {
  const bytes = Uint8Array.from({ length: 1000 }, (_, i) => (i * 37 + 0xff) & 0xff);
  const set = await fetch(`${gateway.url}/set/bin`, {
    method: "POST", headers: { Authorization: `Bearer ${TOKEN}` }, body: bytes,
  });
  assert.equal(set.status, 200);
  const { body } = await command(["GET", "bin"], { headers: { "Upstash-Encoding": "base64" } });
  assert.deepEqual(new Uint8Array(Buffer.from(body.result, "base64")), bytes);
  assert.deepEqual((await command(["STRLEN", "bin"])).body, { result: 1000 });
});

test("a blank token stops the gateway at start with a clear message", async () => {
  for (const blank of ["", "   ", "\t\n"]) {
    const proc = start(GATEWAY_BIN, ["--listen", "127.0.0.1:0", "--redis-url", `redis://127.0.0.1:${redis.port}`], {
      UPSTASH_REDIS_REST_TOKEN: blank,
      RUST_BACKTRACE: "0",
    });
    const { code } = await within(GENEROUS_MS, proc.exited, "the gateway exiting");
    assert.notEqual(code, 0);
    assert.match(proc.stderrText, /--token \(UPSTASH_REDIS_REST_TOKEN\) is blank/, proc.stderrText);
  }
});

/** Runs a bash snippet with the stack library loaded; resolves to its stdout. */
function stackScript(snippet, env = {}) {
  const script = `source "${ROOT}/scripts/lib.sh"; source "${ROOT}/scripts/stack.sh"; ${snippet}`;
  return new Promise((resolve, reject) => {
    execFile("bash", ["-c", script], { env: { ...process.env, ...env }, timeout: 60_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${err.message}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

test("stack: denokv's access token is not on its command line", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "kvbench-stack-"));
  try {
    const out = await stackScript(`
      trap stack_stop EXIT
      stack_init "${dir}"
      start_denokv "$(free_port)"
      echo "TOKEN=$STACK_DENO_TOKEN"
      echo "ARGS=$(ps -o args= -p "$(cat "$STACK_DIR/denokv.pid")")"
    `);
    const token = /TOKEN=(\S+)/.exec(out)[1];
    const args = /ARGS=(.*)/.exec(out)[1];
    assert.match(args, /denokv .*serve/);
    assert.ok(!args.includes(token), `token visible in ps: ${args}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("stack: wrangler dev's inspector is not on 9229, and goes where KVBENCH_INSPECTOR_PORT says", async () => {
  // A stand-in for wrangler that records its arguments and serves the worker port.
  const dir = mkdtempSync(path.join(os.tmpdir(), "kvbench-wrangler-"));
  const fake = path.join(dir, "wrangler");
  writeFileSync(fake, `#!/usr/bin/env node
require("fs").writeFileSync(${JSON.stringify(path.join(dir, "args.json"))}, JSON.stringify(process.argv.slice(2)));
const port = Number(process.argv[process.argv.indexOf("--port") + 1]);
require("net").createServer((s) => s.end()).listen(port, "127.0.0.1");
setTimeout(() => process.exit(0), 30000);
`);
  chmodSync(fake, 0o755);
  try {
    for (const chosen of [undefined, String(await freePort())]) {
      const env = { KVBENCH_WRANGLER_JS: fake, ...(chosen ? { KVBENCH_INSPECTOR_PORT: chosen } : {}) };
      await stackScript(`
        export PATH="${dir}:$PATH"
        trap stack_stop EXIT
        stack_init "${dir}/state"
        GATEWAY_PORT=1
        start_wrangler "$(free_port)"
      `, env);
      const args = JSON.parse(readFileSync(path.join(dir, "args.json"), "utf8"));
      const at = (flag) => args[args.indexOf(flag) + 1];
      assert.ok(args.includes("--inspector-port"), args.join(" "));
      assert.equal(at("--inspector-ip"), "127.0.0.1");
      assert.notEqual(at("--inspector-port"), "9229");
      if (chosen) assert.equal(at("--inspector-port"), chosen);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
