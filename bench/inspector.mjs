// The worker's V8 isolate through workerd's inspector (Miniflare's `inspectorPort`): the Chrome
// DevTools protocol over a WebSocket, one request at a time by id.
import WebSocket from "ws";

/** Connects to the benchmark worker's isolate; returns { send(method, params), close() }. */
export async function inspect(inspectorPort) {
  const targets = await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json();
  const target = targets.find((t) => !/miniflare|entry|proxy/i.test(t.title ?? "")) ?? targets[0];
  const ws = new WebSocket(target.webSocketDebuggerUrl);
  await new Promise((r, j) => (ws.once("open", r), ws.once("error", j)));
  let id = 0;
  const pending = new Map();
  ws.on("message", (m) => {
    const msg = JSON.parse(m);
    if (msg.id && pending.has(msg.id)) {
      pending.get(msg.id)(msg);
      pending.delete(msg.id);
    }
  });
  const send = (method, params = {}) =>
    new Promise((r) => {
      const n = ++id;
      pending.set(n, r);
      ws.send(JSON.stringify({ id: n, method, params }));
    });
  return { send, close: () => ws.close() };
}
