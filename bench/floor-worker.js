// The floor of `/test?stores=...`: a plain JS worker doing only the I/O the benchmark cannot
// avoid, for the stores of its `?stores=` (in /test's order: shuffled, or `?order=`'s): a read
// of one random key out of 1,000 read whole, on a miss the same value written to each (60 s
// TTL), and a tiny JSON answer.
// bench/cpu.mjs runs it beside the Rust worker under the same Miniflare and local services, so
// the worker's CPU per request reads as a ratio to this one's, store by store. Each store's I/O
// is what the Rust worker's store does, in the cheapest JS:
//   kv      `get(key, "arrayBuffer")`; `put(key, value, { expirationTtl })`
//   upstash `POST ["GET", key]` (Upstash-Encoding: base64) read whole; `POST /set/<key>?EX=60`
//           with the value as the body
//   redis   a `connect()` socket per request: `GET`, read the whole reply; `SET k v EX 60`
//   do      a stub `fetch` per read and write; the object (FloorObject, below) keeps rows in
//           SQLite with their expiry and one alarm at the earliest
//   d1      `SELECT value ... AND expires_at > now`; an upsert with the expiry
//   r2      `get` read whole, its expiry in custom metadata; `put` with it
//   cache   `caches.default.match` read whole; `put` of a `Response` with `max-age`
// (Deno KV's KV Connect protocol has no floor here: a JS client of it is more than its I/O.)
// Values come from one buffer made at startup (slices of `?min_bytes=`..`?max_bytes=`, default
// 4–64 KiB, as /test's), so the floor does no per-request generation either.
import { connect } from "cloudflare:sockets";
import { DurableObject } from "cloudflare:workers";

const TTL = 60;
const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const POOL = 1 << 21;
let pool = null;
/** A value of `min`..`max` bytes (`?min_bytes=&max_bytes=`, as /test's; default 4–64 KiB). */
function value(min, max) {
  if (pool === null) {
    const bytes = new Uint8Array(POOL);
    crypto.getRandomValues(bytes.subarray(0, 65536));
    for (let i = 0; i < bytes.length; i++) bytes[i] = ALPHABET.charCodeAt(bytes[i % 65536] & 63);
    pool = bytes;
  }
  const size = min + Math.floor(Math.random() * (max - min + 1));
  const at = Math.floor(Math.random() * (POOL - size));
  return pool.subarray(at, at + size);
}

const SQL_CREATE =
  "CREATE TABLE IF NOT EXISTS kvbench (key TEXT PRIMARY KEY, value BLOB NOT NULL, expires_at INTEGER NOT NULL) WITHOUT ROWID";
const SQL_SELECT = "SELECT value FROM kvbench WHERE key = ?1 AND expires_at > ?2";
const SQL_UPSERT =
  "INSERT INTO kvbench (key, value, expires_at) VALUES (?1, ?2, ?3) ON CONFLICT(key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at";

/** RESP: one command, and one whole reply (a bulk string's bytes read and dropped). */
async function redisCall(socket, args) {
  const enc = new TextEncoder();
  const parts = [enc.encode(`*${args.length}\r\n`)];
  for (const a of args) {
    const bytes = typeof a === "string" ? enc.encode(a) : a;
    parts.push(enc.encode(`$${bytes.length}\r\n`), bytes, enc.encode("\r\n"));
  }
  const writer = socket.writable.getWriter();
  for (const p of parts) await writer.write(p);
  writer.releaseLock();
  const reader = socket.readable.getReader();
  let buf = new Uint8Array(0);
  let need = -1; // bytes of a bulk reply still to come, once its header is read
  let reply = null;
  for (;;) {
    const { value: chunk, done } = await reader.read();
    if (done) throw new Error("redis closed the connection");
    const joined = new Uint8Array(buf.length + chunk.length);
    joined.set(buf);
    joined.set(chunk, buf.length);
    buf = joined;
    if (need < 0) {
      const eol = buf.indexOf(10);
      if (eol < 0) continue;
      const line = new TextDecoder().decode(buf.subarray(0, eol - 1));
      if (line[0] !== "$") {
        reply = line;
        break;
      }
      const len = Number(line.slice(1));
      if (len < 0) {
        reply = null;
        break;
      }
      need = len + 2;
      buf = buf.subarray(eol + 1);
    }
    if (buf.length >= need) {
      reply = buf.subarray(0, need - 2);
      break;
    }
  }
  reader.releaseLock();
  return reply;
}

function redisTarget(url) {
  const u = new URL(url);
  return { hostname: u.hostname, port: Number(u.port || 6379) };
}

const stores = {
  async kv(env, key) {
    const got = await env.BENCH_KV.get(key, "arrayBuffer");
    return {
      hit: got !== null,
      write: (v) => env.BENCH_KV.put(key, v, { expirationTtl: TTL }),
    };
  },
  async upstash(env, key) {
    const url = env.UPSTASH_REDIS_REST_URL;
    const auth = { Authorization: `Bearer ${env.UPSTASH_REDIS_REST_TOKEN}` };
    const res = await fetch(url, {
      method: "POST",
      headers: { ...auth, "Upstash-Encoding": "base64" },
      body: JSON.stringify(["GET", key]),
    });
    const body = await res.arrayBuffer();
    return {
      hit: body.byteLength > 20,
      write: async (v) => {
        const w = await fetch(`${url}/set/${key}?EX=${TTL}`, { method: "POST", headers: auth, body: v });
        await w.arrayBuffer();
      },
    };
  },
  async redis(env, key, ctx) {
    ctx.redis ??= connect(redisTarget(env.REDIS_URL));
    const socket = ctx.redis;
    const got = await redisCall(socket, ["GET", key]);
    return {
      hit: got !== null,
      write: (v) => redisCall(socket, ["SET", key, v, "EX", String(TTL)]),
    };
  },
  async do(env, key) {
    const stub = env.FLOOR_DO.get(env.FLOOR_DO.idFromName(key));
    const res = await stub.fetch(`https://floor.do/${key}`);
    await res.arrayBuffer();
    return {
      hit: res.status === 200,
      write: async (v) => {
        const w = await stub.fetch(`https://floor.do/${key}`, { method: "PUT", body: v });
        await w.arrayBuffer();
      },
    };
  },
  async d1(env, key) {
    const rows = await env.BENCH_D1.prepare(SQL_SELECT).bind(key, Date.now()).raw();
    return {
      hit: rows.length > 0,
      write: (v) =>
        env.BENCH_D1.prepare(SQL_UPSERT)
          .bind(key, new TextDecoder().decode(v), Date.now() + TTL * 1000)
          .run(),
    };
  },
  async r2(env, key) {
    const object = await env.BENCH_R2.get(key);
    let hit = false;
    if (object !== null) {
      const expires = Number(object.customMetadata?.["expires-at-ms"] ?? 0);
      hit = expires > Date.now();
      if (hit) await object.arrayBuffer();
    }
    return {
      hit,
      write: (v) =>
        env.BENCH_R2.put(key, v, { customMetadata: { "expires-at-ms": String(Date.now() + TTL * 1000) } }),
    };
  },
  async cache(env, key, ctx) {
    const url = `${ctx.origin}/${key}`;
    const got = await caches.default.match(url);
    if (got) await got.arrayBuffer();
    return {
      hit: got !== undefined,
      write: (v) =>
        caches.default.put(url, new Response(v, { headers: { "Cache-Control": `max-age=${TTL}` } })),
    };
  },
};

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    // The stores in /test's order: shuffled per request unless `?order=` names one. (The mix of
    // orders costs workerd's I/O CPU too — ~50 µs a request for kv,upstash against one fixed
    // order, on the floor as on ours — so the floor takes the same orders as /test.)
    const order = url.searchParams.get("order") ?? "random";
    const names = (order === "random" ? url.searchParams.get("stores") ?? "kv,upstash" : order).split(",");
    if (order === "random") {
      for (let i = names.length - 1; i > 0; i--) {
        const j = Math.floor(Math.random() * (i + 1));
        [names[i], names[j]] = [names[j], names[i]];
      }
    }
    const min = Number(url.searchParams.get("min_bytes") ?? 4096);
    const max = Number(url.searchParams.get("max_bytes") ?? 65536);
    const key = String(Math.floor(Math.random() * 1000));
    const ctx = { origin: url.origin, redis: null };
    const out = {};
    let v = null;
    try {
      for (const name of names) {
        const store = stores[name];
        if (!store) return new Response(`no floor for ${name}`, { status: 400 });
        const t0 = Date.now();
        const { hit, write } = await store(env, `floor:${name}:${key}`, ctx);
        const t1 = Date.now();
        if (!hit) await write((v ??= value(min, max)));
        out[name] = { read_ms: t1 - t0, hit };
      }
    } finally {
      if (ctx.redis) ctx.redis.close();
    }
    return new Response(JSON.stringify(out), { headers: { "Content-Type": "application/json" } });
  },
};

/** The `do` floor's object: rows in its SQLite with their expiry, one alarm at the earliest. */
export class FloorObject extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.table = false;
  }

  async fetch(request) {
    const key = new URL(request.url).pathname.slice(1);
    if (request.method === "PUT") {
      const body = await request.arrayBuffer();
      const expires = Date.now() + TTL * 1000;
      // Like the worker's object: the table is made by a write, never by a read.
      if (!this.table) this.sql.exec(SQL_CREATE);
      this.table = true;
      this.sql.exec(SQL_UPSERT, key, body, expires);
      const due = await this.ctx.storage.getAlarm();
      if (due === null || due > expires) await this.ctx.storage.setAlarm(expires);
      return new Response(null, { status: 204 });
    }
    let rows = [];
    try {
      rows = this.sql.exec(SQL_SELECT, key, Date.now()).toArray();
    } catch {
      // No table yet (or any more): a miss.
    }
    if (rows.length === 0) return new Response(null, { status: 404 });
    return new Response(rows[0].value);
  }

  async alarm() {
    this.sql.exec("DELETE FROM kvbench WHERE expires_at <= ?1", Date.now());
    const next = this.sql.exec("SELECT MIN(expires_at) AS next FROM kvbench").one().next;
    if (next !== null) await this.ctx.storage.setAlarm(next);
    else {
      await this.ctx.storage.deleteAll();
      this.table = false;
    }
  }
}
