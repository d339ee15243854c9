// The stack's delay layer (scripts/delay-proxy.mjs): a stream through it arrives whole and in
// order even when every chunk draws its own delay; no chunk arrives before its delay (timers never
// fire early, so this lower bound holds on any machine); the drift factor is the same for every
// proxy given the same seed and moves between windows; bad specs are refused naming the flag.
import { test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { startDelayProxy, parseDelay, parseDrift, driftFactor } from "../../scripts/delay-proxy.mjs";

async function echoServer() {
  const server = net.createServer((s) => s.pipe(s));
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return server;
}

async function through(delay, chunks) {
  const echo = await echoServer();
  const proxy = await startDelayProxy({ port: 0, target: `127.0.0.1:${echo.address().port}`, delay, seed: 3 });
  const socket = net.connect(proxy.address().port, "127.0.0.1");
  await new Promise((r) => socket.once("connect", r));
  socket.setNoDelay(true);
  const sent = Buffer.concat(chunks);
  const got = [];
  let firstAt = null;
  const start = Date.now();
  const done = new Promise((resolve) =>
    socket.on("data", (d) => {
      firstAt ??= Date.now();
      got.push(d);
      if (Buffer.concat(got).length >= sent.length) resolve();
    }),
  );
  for (const c of chunks) {
    socket.write(c);
    await new Promise((r) => setImmediate(r));
  }
  await done;
  socket.destroy();
  proxy.close();
  echo.close();
  return { sent, got: Buffer.concat(got), firstMs: firstAt - start };
}

test("a stream arrives whole and in order through per-chunk random delays", async () => {
  const chunks = Array.from({ length: 400 }, (_, i) => Buffer.from(`chunk ${i};`.repeat(1 + (i % 7))));
  const { sent, got } = await through(parseDelay("5~1.0"), chunks);
  assert.equal(got.length, sent.length);
  assert.ok(got.equals(sent), "the bytes came back reordered or changed");
});

test("nothing arrives before its delay", async () => {
  const { firstMs } = await through(parseDelay("300"), [Buffer.from("ping")]);
  assert.ok(firstMs >= 299, `first byte after ${firstMs} ms`);
});

test("the drift factor is shared by seed and window, and specs are checked", () => {
  const drift = parseDrift("0.4/60");
  assert.deepEqual(drift, { sigma: 0.4, periodS: 60 });
  const t = 1_700_000_000_000;
  assert.equal(driftFactor(drift, 9, t), driftFactor(drift, 9, t + 59_000 - (t % 60_000)));
  const factors = new Set(Array.from({ length: 20 }, (_, w) => driftFactor(drift, 9, w * 60_000)));
  assert.ok(factors.size > 15, "a new factor each window");
  assert.equal(driftFactor(null, 9, t), 1);
  assert.deepEqual(parseDelay("20~0.3"), { ms: 20, sigma: 0.3 });
  assert.throws(() => parseDelay("fast"), /--delay: expected MS or MS~SIGMA/);
  assert.throws(() => parseDrift("0.4"), /--drift: expected SIGMA\/PERIOD_S/);
});
