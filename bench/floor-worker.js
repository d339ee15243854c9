// The floor of `/test?stores=kv,upstash`: a plain JS worker doing only the I/O the benchmark
// cannot avoid — one KV `get` as an ArrayBuffer, one Upstash REST `GET` read whole, on a miss the
// same value written to both (60 s TTL), and a tiny JSON answer. bench/cpu.mjs runs it beside the
// Rust worker under the same Miniflare and gateway, so the worker's CPU per request can be read
// as a ratio to this one. Values come from one buffer made at startup (4–64 KiB slices), so the
// floor does no per-request generation either.
const MIN = 4096;
const MAX = 65536;
const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
let pool = null;
function value() {
  if (pool === null) {
    const bytes = new Uint8Array(MAX * 2);
    crypto.getRandomValues(bytes.subarray(0, 65536));
    for (let i = 0; i < bytes.length; i++) bytes[i] = ALPHABET.charCodeAt(bytes[i % 65536] & 63);
    pool = new TextDecoder().decode(bytes);
  }
  const size = MIN + Math.floor(Math.random() * (MAX - MIN + 1));
  const at = Math.floor(Math.random() * MAX);
  return pool.slice(at, at + size);
}

export default {
  async fetch(request, env) {
    const key = String(Math.floor(Math.random() * 1000));
    const auth = { Authorization: `Bearer ${env.UPSTASH_REDIS_REST_TOKEN}` };
    const url = env.UPSTASH_REDIS_REST_URL;
    const t0 = Date.now();
    const kv = await env.BENCH_KV.get(key, { type: "arrayBuffer" });
    const t1 = Date.now();
    const up = await fetch(url, { method: "POST", headers: auth, body: JSON.stringify(["GET", key]) });
    const upBody = await up.arrayBuffer();
    const t2 = Date.now();
    const miss = kv === null;
    if (miss) {
      const v = value();
      await env.BENCH_KV.put(key, v, { expirationTtl: 60 });
      const w = await fetch(url, { method: "POST", headers: auth, body: JSON.stringify(["SET", key, v, "EX", "60"]) });
      await w.arrayBuffer();
    }
    return new Response(
      JSON.stringify({ kv: t1 - t0, upstash: t2 - t1, miss, bytes: upBody.byteLength }),
      { headers: { "Content-Type": "application/json" } },
    );
  },
};
