// A TCP proxy on loopback that delays what the target sends back: the stack's one delay layer
// (this kernel has no netem). Used for a replica's link to its primary (a known replication lag)
// and in front of a store (a known latency). Order is kept: a chunk leaves no sooner than the one
// before it.
//
//   node scripts/delay-proxy.mjs --port P --target HOST:PORT [--delay MS[~SIGMA]] [--drift SIGMA/PERIOD_S] [--seed N]
//
// --delay 1500: every chunk from the target waits 1500 ms. --delay 20~0.3: 20 ms × exp(N(0, 0.3)),
// drawn per chunk. --drift 0.4/60: every delay is multiplied by exp(N(0, 0.4)) drawn afresh every
// 60 s of wall-clock time from --seed, so every proxy given the same seed shares the same factor.
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** `MS[~SIGMA]` → { ms, sigma }, or throws naming the flag. */
export function parseDelay(text, flag = "--delay") {
  const m = /^(\d+(?:\.\d+)?)(?:~(\d+(?:\.\d+)?))?$/.exec(String(text).trim());
  if (!m) throw new Error(`${flag}: expected MS or MS~SIGMA (e.g. 20~0.3), got '${text}'`);
  return { ms: Number(m[1]), sigma: m[2] === undefined ? 0 : Number(m[2]) };
}

/** `SIGMA/PERIOD_S` → { sigma, periodS }, or throws naming the flag. */
export function parseDrift(text, flag = "--drift") {
  const m = /^(\d+(?:\.\d+)?)\/(\d+(?:\.\d+)?)$/.exec(String(text).trim());
  if (!m || Number(m[2]) <= 0) throw new Error(`${flag}: expected SIGMA/PERIOD_S (e.g. 0.4/60), got '${text}'`);
  return { sigma: Number(m[1]), periodS: Number(m[2]) };
}

/** A standard normal draw from a 32-bit seeded generator (mulberry32, Box–Muller). */
function normalFrom(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return () => Math.sqrt(-2 * Math.log(1 - next())) * Math.cos(2 * Math.PI * next());
}

/** The drift factor in force at `nowMs`: the same for every proxy with the same seed. */
export function driftFactor(drift, seed, nowMs) {
  if (!drift || drift.sigma === 0) return 1;
  const window = Math.floor(nowMs / (drift.periodS * 1000));
  return Math.exp(drift.sigma * normalFrom((seed * 2654435761 + window) >>> 0)());
}

/** Starts the proxy; resolves to the server once it listens. */
export function startDelayProxy({ port, host = "127.0.0.1", target, delay, drift = null, seed = 1 }) {
  const [targetHost, targetPort] = target.split(":");
  const normal = normalFrom(seed + 7);
  const delayMs = () =>
    delay.ms * Math.exp(delay.sigma * (delay.sigma ? normal() : 0)) * driftFactor(drift, seed, Date.now());
  const server = net.createServer((client) => {
    client.setNoDelay(true);
    const upstream = net.connect({ host: targetHost, port: Number(targetPort) });
    upstream.setNoDelay(true);
    // One queue per connection, drained by one timer: separate timers per chunk may fire out of
    // order (their deadlines are taken from the loop's cached clock), which corrupts a stream.
    const queue = [];
    let timer = null;
    let ended = false;
    const pump = () => {
      timer = null;
      while (queue.length && queue[0].at <= Date.now()) {
        const { chunk } = queue.shift();
        if (!client.destroyed) client.write(chunk);
      }
      if (queue.length) timer = setTimeout(pump, Math.max(0, queue[0].at - Date.now()));
      else if (ended) client.end();
    };
    client.on("data", (chunk) => upstream.write(chunk));
    upstream.on("data", (chunk) => {
      const last = queue.length ? queue[queue.length - 1].at : 0;
      queue.push({ at: Math.max(last, Date.now() + delayMs()), chunk });
      if (!timer) timer = setTimeout(pump, Math.max(0, queue[0].at - Date.now()));
    });
    upstream.on("end", () => {
      ended = true;
      if (!timer) pump();
    });
    client.on("end", () => upstream.end());
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", close);
    upstream.on("error", close);
    client.on("close", () => upstream.destroy());
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve(server));
  });
}

// Run as a script (a path with spaces is percent-encoded in import.meta.url: compare paths).
if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const args = process.argv.slice(2);
  const flag = (name) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
  };
  try {
    const port = Number(flag("--port"));
    const target = flag("--target");
    if (!Number.isInteger(port) || !target) throw new Error("usage: --port P --target HOST:PORT [--delay MS[~SIGMA]] [--drift SIGMA/PERIOD_S] [--seed N]");
    const delay = parseDelay(flag("--delay") ?? "0");
    const drift = flag("--drift") ? parseDrift(flag("--drift")) : null;
    const seed = Number(flag("--seed") ?? 1);
    await startDelayProxy({ port, target, delay, drift, seed });
    console.log(`delay-proxy 127.0.0.1:${port} -> ${target}: ${delay.ms} ms~${delay.sigma}${drift ? `, drift ${drift.sigma}/${drift.periodS} s` : ""}`);
  } catch (e) {
    console.error(`delay-proxy: ${e.message}`);
    process.exit(2);
  }
}
