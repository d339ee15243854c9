// Postgres servers that misbehave after the handshake, against the built worker under workerd:
// rows without end, messages without end, a byte a second, a handshake that never answers. Each
// must end within TIMEOUT_MS (plus the drain of an abandoned call, at most TIMEOUT_MS again)
// with an error of the postgres store alone — KV measured in the same answer — and workerd's
// memory must stay bounded. Before the fix, rows without end grew workerd from 72 to 2,243 MiB
// and a panic ("capacity overflow") ended the isolate; the timeout never fired while bytes kept
// arriving. Every server here is started and stopped by the test, on loopback.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import net from "node:net";
import { childPids, startWorker } from "./procs.mjs";

const TIMEOUT_MS = 2000;
/** workerd may grow by at most this while one hostile call runs (it held 1 MiB buffers at most;
 * before the fix rows without end took it past 2 GiB). */
const MAX_GROWTH_MIB = 160;
const servers = [];
after(() => {
  for (const s of servers) s.close();
});

const message = (tag, body) => {
  const out = Buffer.alloc(5 + body.length);
  out[0] = tag.charCodeAt(0);
  out.writeUInt32BE(body.length + 4, 1);
  body.copy(out, 5);
  return out;
};
const AUTH_OK = Buffer.concat([message("R", Buffer.from([0, 0, 0, 0])), message("Z", Buffer.from("I"))]);
const ROW = message("D", Buffer.from([0, 1, 0, 0, 0, 1, 0x76]));
const NOTICE = message("N", Buffer.from("SNOTICE\0C00000\0Mhello\0\0"));

/** A server that trusts every client (AuthenticationOk), then runs `onQuery(socket)` when the
 * first statement arrives. `onConnect` instead replaces the handshake. */
async function server({ onQuery, onConnect }) {
  const srv = net.createServer((socket) => {
    socket.setNoDelay(true);
    socket.on("error", () => {});
    if (onConnect) return onConnect(socket);
    let stage = 0;
    socket.on("data", () => {
      if (stage === 0) {
        stage = 1;
        socket.write(AUTH_OK);
      } else if (stage === 1) {
        stage = 2;
        onQuery(socket);
      }
    });
  });
  servers.push(srv);
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  return `postgres://kvbench:hostile-password@127.0.0.1:${srv.address().port}/kvbench?sslmode=disable`;
}

/** Writes `chunk` for as long as the socket takes it (stops when the client goes away). */
function flood(socket, chunk) {
  const big = Buffer.concat(Array.from({ length: Math.ceil(65536 / chunk.length) }, () => chunk));
  const pump = () => {
    while (!socket.destroyed && socket.write(big));
  };
  socket.on("drain", pump);
  pump();
}

const rssMiB = (pid) => Number(fs.readFileSync(`/proc/${pid}/status`, "utf8").match(/VmRSS:\s+(\d+)/)[1]) / 1024;

async function measure(url) {
  const worker = await startWorker({ POSTGRES_URL: url, STORES: "kv,postgres", TIMEOUT_MS: String(TIMEOUT_MS) });
  try {
    // Warm: the isolate, its KV namespace and the wasm, so growth is the call's alone.
    await (await worker.dispatchFetch("http://localhost/test?stores=kv&key=warm")).text();
    const pids = childPids("workerd");
    const before = Math.max(...pids.map(rssMiB));
    let peak = before;
    const sampler = setInterval(() => {
      for (const pid of pids) {
        try {
          peak = Math.max(peak, rssMiB(pid));
        } catch {
          /* gone */
        }
      }
    }, 50);
    const started = Date.now();
    const res = await worker.dispatchFetch("http://localhost/test?stores=kv,postgres&key=hostile", { signal: AbortSignal.timeout(4 * TIMEOUT_MS + 10_000) });
    const json = JSON.parse(await res.text());
    const elapsed = Date.now() - started;
    clearInterval(sampler);
    // The same isolate still answers.
    const again = await worker.dispatchFetch("http://localhost/test?stores=kv&key=after");
    assert.equal(again.status, 200, "the isolate survived");
    await again.text();
    return { status: res.status, json, elapsed, growth: peak - before };
  } finally {
    await worker.dispose();
  }
}

const cases = [
  ["rows without end", { onQuery: (s) => flood(s, ROW) }, "protocol", /more than 1 row/],
  ["messages without end", { onQuery: (s) => flood(s, NOTICE) }, "timeout", /no answer within 2000 ms/],
  ["a byte a second", { onQuery: (s) => { const t = setInterval(() => (s.destroyed ? clearInterval(t) : s.write(NOTICE.subarray(0, 1))), 1000); } }, "timeout", /no answer within 2000 ms/],
  ["a handshake that never answers", { onConnect: () => {} }, "timeout", /no answer within 2000 ms/],
];

for (const [name, behaviour, kind, messageRe] of cases) {
  test(`a Postgres server sending ${name}: an error of its store alone, in bounded time and memory`, { timeout: 60_000 }, async () => {
    const { status, json, elapsed, growth } = await measure(await server(behaviour));
    assert.equal(status, 200);
    const pg = json.stores.postgres;
    assert.equal(pg.error?.kind, kind, JSON.stringify(pg));
    assert.match(pg.error.message, messageRe);
    assert.equal(json.stores.kv.error, null, "KV measured as ever");
    assert.equal(typeof json.stores.kv.read_ms, "number");
    // The call ends at its deadline, its drain at most TIMEOUT_MS later; the rest is the
    // machine (a cold isolate's first Postgres call, a shared CPU).
    assert.ok(elapsed < 2 * TIMEOUT_MS + 5000, `answered after ${elapsed} ms`);
    assert.ok(growth < MAX_GROWTH_MIB, `workerd grew by ${growth.toFixed(0)} MiB`);
    assert.ok(!JSON.stringify(json).includes("hostile-password"));
    console.log(`${name}: answered in ${elapsed} ms, workerd grew ${growth.toFixed(1)} MiB, postgres ${pg.error.kind}`);
  });
}
