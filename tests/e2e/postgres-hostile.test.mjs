// Postgres servers that misbehave after the handshake, against the built worker under workerd:
// rows without end, messages without end, a byte a second, a handshake that never answers. Each
// must end within TIMEOUT_MS (plus the drain of an abandoned call, at most TIMEOUT_MS again)
// with an error of the postgres store alone — KV measured in the same answer — and workerd's
// memory must stay bounded. Before the fix, rows without end grew workerd from 72 to 2,243 MiB
// and a panic ("capacity overflow") ended the isolate, and messages without end were never
// answered: the timer never fired while bytes kept arriving. Every server here is started and
// stopped by the test, on loopback.
import { test, after } from "node:test";
import { assertContained, closeAll, flood, measureHostile, tcpServer, trickle } from "./hostile.mjs";

const TIMEOUT_MS = Number(process.env.HOSTILE_TIMEOUT_MS ?? 2000);
/** workerd's peak may grow by at most this while one hostile call runs (the client holds a 64 KiB
 * read buffer and one message of at most 2 MiB; before the fix rows without end took it past
 * 2 GiB). A flood of messages the client reads and drops leaves garbage the isolate collects late:
 * read as the kernel's peak (not RSS sampled every 50 ms, which missed it), workerd 1.20261117
 * peaks ~200 MiB above its start and stays there however long the flood lasts (173, 195 and 201
 * MiB for floods of 1, 2 and 5 s, 2026-12-06): a bound, not a leak. */
const MAX_GROWTH_MIB = 256;
const PASSWORD = "hostile-password";
after(closeAll);

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
 * first statement arrives; `onConnect` instead replaces the handshake. Its URL. */
async function server({ onQuery, onConnect }) {
  const port = await tcpServer((socket) => {
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
  return `postgres://kvbench:${PASSWORD}@127.0.0.1:${port}/kvbench?sslmode=disable`;
}

const cases = [
  ["rows without end", { onQuery: (s) => flood(s, ROW) }, "protocol", /more than 1 row/],
  ["messages without end", { onQuery: (s) => flood(s, NOTICE) }, "timeout", new RegExp(`no answer within ${TIMEOUT_MS} ms`)],
  ["a byte a second", { onQuery: (s) => trickle(s, NOTICE) }, "timeout", new RegExp(`no answer within ${TIMEOUT_MS} ms`)],
  ["a handshake that never answers", { onConnect: () => {} }, "timeout", new RegExp(`no answer within ${TIMEOUT_MS} ms`)],
];

for (const [name, behaviour, kind, message] of cases) {
  test(`a Postgres server sending ${name}: an error of its store alone, in bounded time and memory`, { timeout: 60_000 }, async () => {
    const r = await measureHostile("postgres", { POSTGRES_URL: await server(behaviour) }, TIMEOUT_MS);
    assertContained(name, "postgres", r, { kind, message, timeoutMs: TIMEOUT_MS, maxGrowthMiB: MAX_GROWTH_MIB, secrets: [PASSWORD] });
  });
}
