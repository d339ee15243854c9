// The other remote stores' servers misbehaving, against the built worker under workerd: Upstash
// REST and Deno KV over `fetch` (a body without end and without a length, a length far over the
// limit, a byte a second), Redis over TCP (a bulk reply without end, a byte a second). Each must
// end within TIMEOUT_MS (plus the drain, at most TIMEOUT_MS again) or at the response limit
// (`MAX_RESPONSE_BYTES`, 4 MiB), with an error of that store alone — KV measured in the same
// answer — and workerd's memory bounded. Every server is started and stopped by the test.
import { test, after } from "node:test";
import { assertContained, closeAll, flood, measureHostile, tcpServer, trickle } from "./hostile.mjs";

const TIMEOUT_MS = Number(process.env.HOSTILE_TIMEOUT_MS ?? 2000);
/** Bodies are cut at 4 MiB; the rest is the isolate's own churn, read as the kernel's peak: a
 * bulk reply without end peaks ~200 MiB above workerd's start (garbage collected late, the same
 * plateau as postgres-hostile's flood of messages) and no higher however long it lasts. */
const MAX_GROWTH_MIB = 256;
const TOKEN = "hostile-store-token-0123456789";
after(closeAll);

/** An HTTP server that answers every request with `head` and then runs `body(socket)`. */
const http = (head, body = () => {}) =>
  tcpServer((socket) => {
    let answered = false;
    socket.on("data", () => {
      if (answered) return;
      answered = true;
      socket.write(head);
      body(socket);
    });
  });
const CHUNKED = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
const chunk = (text) => Buffer.from(`${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`);
const HUGE = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 104857600\r\n\r\n";

const endless = (s) => flood(s, chunk("x".repeat(8000)));
const slow = (s) => trickle(s, chunk("x"));

const cases = [
  // Upstash's REST API, over fetch.
  ["upstash", "a body without end", () => http(CHUNKED, endless), "protocol", /over the 4 MiB limit/],
  ["upstash", "a 100 MB body announced", () => http(HUGE, endless), "protocol", /104857600 bytes: over the 4 MiB limit/],
  ["upstash", "a byte a second", () => http(CHUNKED, slow), "timeout", new RegExp(`no answer within ${TIMEOUT_MS} ms`)],
  // Deno KV's KV Connect, over fetch (the metadata exchange is the first call).
  ["denokv", "a body without end", () => http(CHUNKED, endless), "protocol", /over the 4 MiB limit/],
  ["denokv", "a byte a second", () => http(CHUNKED, slow), "timeout", new RegExp(`no answer within ${TIMEOUT_MS} ms`)],
  // Redis over TCP: a bulk reply far longer than any value, then bytes without end.
  ["redis", "a bulk reply without end", () => tcpServer((s) => s.once("data", () => { s.write("$999999999999\r\n"); flood(s, Buffer.alloc(65536, 120)); })), "timeout", new RegExp(`no answer within ${TIMEOUT_MS} ms`)],
  ["redis", "a byte a second", () => tcpServer((s) => s.once("data", () => trickle(s, Buffer.from("+OK\r\n")))), "timeout", new RegExp(`no answer within ${TIMEOUT_MS} ms`)],
];

const bindingsOf = (store, port) =>
  ({
    upstash: { UPSTASH_REDIS_REST_URL: `http://127.0.0.1:${port}`, UPSTASH_REDIS_REST_TOKEN: TOKEN },
    denokv: { DENO_KV_URL: `http://127.0.0.1:${port}`, DENO_KV_ACCESS_TOKEN: TOKEN },
    redis: { REDIS_URL: `redis://default:${TOKEN}@127.0.0.1:${port}` },
  })[store];

for (const [store, name, serve, kind, message] of cases) {
  test(`${store}: a server sending ${name}: an error of its store alone, in bounded time and memory`, { timeout: 60_000 }, async () => {
    const r = await measureHostile(store, bindingsOf(store, await serve()), TIMEOUT_MS);
    assertContained(`${store}, ${name}`, store, r, { kind, message, timeoutMs: TIMEOUT_MS, maxGrowthMiB: MAX_GROWTH_MIB, secrets: [TOKEN] });
  });
}
