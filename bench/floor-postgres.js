// The floor of `/test?stores=postgres`: a plain JS worker doing the same I/O with a well-known
// JS driver, postgres.js (`postgres` on npm, its Cloudflare build over `cloudflare:sockets`;
// nodejs_compat): a connection per request (Workers cannot keep one), the same read — `SELECT v
// ... WHERE k = $1 AND expires_at > now()` — of one random key out of 1,000, on a miss the same
// upsert with a 4–64 KiB value (`?min_bytes=`..`?max_bytes=`) and a 60 s TTL, then `end()`.
// Like the Rust store it skips the driver's type lookup and sends unnamed statements
// (`fetch_types: false`, `prepare: false`: one round trip a query, as ours).
// bench/cpu.mjs runs it beside the Rust worker (`--sets postgres`).
import postgres from "../node_modules/postgres/cf/src/index.js";

const TTL = 60;
let pool = null;
function value(min, max) {
  pool ??= crypto.getRandomValues(new Uint8Array(65536));
  const size = min + Math.floor(Math.random() * (max - min + 1));
  const out = new Uint8Array(size);
  for (let at = 0; at < size; at += pool.length) out.set(pool.subarray(0, Math.min(pool.length, size - at)), at);
  return out;
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const min = Number(url.searchParams.get("min_bytes") ?? 4096);
    const max = Number(url.searchParams.get("max_bytes") ?? 65536);
    const key = `floor:postgres:${Math.floor(Math.random() * 1000)}`;
    const sql = postgres(env.POSTGRES_URL, { max: 1, prepare: false, fetch_types: false, onnotice: () => {} });
    try {
      const rows = await sql`SELECT v FROM kvbench_values WHERE k = ${key} AND expires_at > now()`;
      const hit = rows.length > 0;
      if (!hit) {
        await sql`INSERT INTO kvbench_values (k, v, expires_at) VALUES (${key}, ${value(min, max)}, now() + make_interval(secs => ${TTL}))
                  ON CONFLICT (k) DO UPDATE SET v = excluded.v, expires_at = excluded.expires_at`;
      }
      return new Response(JSON.stringify({ postgres: { hit } }), { headers: { "Content-Type": "application/json" } });
    } finally {
      await sql.end();
    }
  },
};
