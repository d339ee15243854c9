// The child process of hyperdrive-reload.test.mjs: a Miniflare whose worker holds a Hyperdrive
// connection open, with bytes from the "database" it has not read, while Miniflare reloads it (as
// wrangler dev does after an edit). workerd's restart resets that connection. Prints "alive after
// the reload" and exits 0 when the process survives (Miniflare 4 did not: workers-sdk#15768).
import net from "node:net";
import { Miniflare } from "miniflare";
import { compatibilityDate, miniflareOptions } from "../../scripts/worker-options.mjs";

const WORKER = `
import { connect } from "cloudflare:sockets";
export default {
  async fetch(request, env) {
    const socket = connect({ hostname: env.BENCH_HYPERDRIVE.host, port: env.BENCH_HYPERDRIVE.port });
    await socket.opened;
    await new Promise(() => {}); // holds the connection and reads nothing
  },
};`;

// A stand-in database on loopback: sends bytes every 50 ms that the worker never reads, so the
// connection has unread data when workerd goes away (a reset, not a clean close).
let connected;
const seen = new Promise((resolve) => (connected = resolve));
const db = net.createServer((socket) => {
  socket.on("error", () => {});
  const timer = setInterval(() => socket.write(Buffer.alloc(1024, 1)), 50);
  socket.on("close", () => clearInterval(timer));
  connected();
});
await new Promise((resolve) => db.listen(0, "127.0.0.1", resolve));
const options = {
  modules: true,
  script: WORKER,
  compatibilityDate: compatibilityDate(),
  hyperdrives: { BENCH_HYPERDRIVE: `postgres://kvbench:pw@127.0.0.1:${db.address().port}/kvbench?sslmode=disable` },
};
const mf = new Miniflare(miniflareOptions(options));
await mf.ready;
mf.dispatchFetch("http://localhost/").catch(() => {});
const deadline = setTimeout(() => {
  console.error("the worker never connected");
  process.exit(3);
}, 30_000);
await seen;
clearTimeout(deadline);
await new Promise((resolve) => setTimeout(resolve, 500)); // bytes reach workerd unread
await mf.setOptions(miniflareOptions(options)); // the reload: workerd restarts
await new Promise((resolve) => setTimeout(resolve, 1000)); // the reset, if it kills, kills here
console.log("alive after the reload");
await mf.dispose();
process.exit(0);
