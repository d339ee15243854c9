// Hostile servers for the end-to-end suites: a store's server that misbehaves (streams without
// end, trickles, never answers), and one measured `/test` against it with workerd's memory
// sampled. Every server is on loopback, started by the test and closed by `closeAll`.
import assert from "node:assert/strict";
import net from "node:net";
import { childPids, peakRssMiB, resetPeakRss, rssMiB, startWorker } from "./procs.mjs";

const servers = [];

/** A TCP server on a free loopback port running `onConnection(socket)`; its port. */
export async function tcpServer(onConnection) {
  const srv = net.createServer((socket) => {
    socket.setNoDelay(true);
    socket.on("error", () => {});
    onConnection(socket);
  });
  servers.push(srv);
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  return srv.address().port;
}

export function closeAll() {
  for (const s of servers.splice(0)) {
    s.close();
  }
}

/** Writes `chunk` for as long as the socket takes it (stops when the client goes away). */
export function flood(socket, chunk) {
  const big = Buffer.concat(Array.from({ length: Math.ceil(65536 / chunk.length) }, () => chunk));
  const pump = () => {
    while (!socket.destroyed && socket.write(big));
  };
  socket.on("drain", pump);
  pump();
}

/** Writes one byte of `bytes` a second, in turn, until the client goes away. */
export function trickle(socket, bytes) {
  let i = 0;
  const t = setInterval(() => (socket.destroyed ? clearInterval(t) : socket.write(bytes.subarray(i % bytes.length, (i++ % bytes.length) + 1))), 1000);
  socket.on("close", () => clearInterval(t));
}

/**
 * Starts the built worker with `bindings`, warms it, then measures `/test?stores=kv,<store>`
 * once: the answer, how long it took, and how much workerd grew meanwhile (its peak RSS, from the kernel's high-water mark).
 * The same isolate must still answer afterwards.
 */
export async function measureHostile(store, bindings, timeoutMs) {
  const worker = await startWorker({ ...bindings, STORES: `kv,${store}`, TIMEOUT_MS: String(timeoutMs) });
  try {
    await (await worker.dispatchFetch("http://localhost/test?stores=kv&key=warm")).text();
    const pids = childPids("workerd");
    const before = Math.max(...pids.map((pid) => rssMiB(pid)));
    for (const pid of pids) resetPeakRss(pid);
    const started = Date.now();
    const res = await worker.dispatchFetch(`http://localhost/test?stores=kv,${store}&key=hostile`, { signal: AbortSignal.timeout(4 * timeoutMs + 10_000) });
    const text = await res.text();
    const elapsed = Date.now() - started;
    // The kernel's high-water mark of each workerd since the reset: the peak, not a sample.
    const peak = Math.max(...pids.map(peakRssMiB));
    const again = await worker.dispatchFetch("http://localhost/test?stores=kv&key=after");
    assert.equal(again.status, 200, "the isolate survived");
    await again.text();
    return { status: res.status, text, json: JSON.parse(text), elapsed, growth: peak - before };
  } finally {
    await worker.dispose();
  }
}

/** The checks every hostile case shares: an error of `store` alone, of `kind` and matching
 * `message`, KV measured in the same answer, within the deadline and its drain, and workerd's
 * growth under `maxGrowthMiB`; `secrets` never in the answer. Prints the figures. */
export function assertContained(name, store, r, { kind, message, timeoutMs, maxGrowthMiB, secrets = [] }) {
  assert.equal(r.status, 200);
  const s = r.json.stores[store];
  assert.equal(s.error?.kind, kind, JSON.stringify(s));
  assert.match(s.error.message, message);
  assert.equal(r.json.stores.kv.error, null, "KV measured as ever");
  assert.equal(typeof r.json.stores.kv.read_ms, "number");
  // The call ends at its deadline, its drain at most TIMEOUT_MS later; the rest is the machine
  // (a cold isolate's first call, a shared CPU).
  assert.ok(r.elapsed < 2 * timeoutMs + 5000, `answered after ${r.elapsed} ms`);
  assert.ok(r.growth < maxGrowthMiB, `workerd grew by ${r.growth.toFixed(0)} MiB`);
  for (const secret of secrets) assert.ok(!r.text.includes(secret), "a secret in the answer");
  console.log(`${name}: answered in ${r.elapsed} ms, workerd grew ${r.growth.toFixed(1)} MiB, ${store} ${s.error.kind}`);
}
