// A minimal Upstash REST endpoint for the worker's end-to-end tests: GET and SET ... EX on an
// in-memory map, bearer auth, a record of every command, and switchable faults (status, body,
// hang). The full Upstash-compatible gateway over a real redis-server lives in crates/gateway.
import http from "node:http";

export async function startFixture(token) {
  const state = {
    data: new Map(),
    commands: [],
    auth: [],
    gets: [],
    fault: null, // { status, body } | { hang: true }
  };
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const send = (status, body) => {
        res.writeHead(status, { "content-type": "application/json" });
        res.end(typeof body === "string" ? body : JSON.stringify(body));
      };
      state.auth.push(req.headers.authorization);
      if (state.fault?.hang) return; // never answer: the worker must time out and abort
      if (state.fault) return send(state.fault.status, state.fault.body);
      if (req.headers.authorization !== `Bearer ${token}`) return send(401, { error: "Unauthorized" });
      // The JSON command array at `/`, or Upstash's path form: `/cmd/arg…`, a non-empty body
      // appended as an argument (bytes kept as latin1 text), then the query's pairs (a number
      // as a number, as JSON would carry it).
      const url = new URL(req.url, "http://fixture");
      const body = Buffer.concat(chunks);
      let cmd;
      if (url.pathname !== "/") {
        cmd = url.pathname.split("/").filter(Boolean).map(decodeURIComponent);
        cmd[0] = cmd[0].toUpperCase();
        if (body.length) cmd.push(body.toString("latin1"));
        for (const [k, v] of url.searchParams) {
          if (k === "_token") continue;
          cmd.push(k);
          if (v !== "") cmd.push(/^\d+$/.test(v) ? Number(v) : v);
        }
      } else {
        try {
          cmd = JSON.parse(body.toString("utf8"));
        } catch {
          return send(400, { error: "ERR failed to parse command" });
        }
      }
      state.commands.push(cmd);
      const [name, key, value, ex, ttl] = cmd;
      if (name === "GET") {
        // Like Upstash: with `Upstash-Encoding: base64` every string result is base64 (stored
        // values are Buffers here, so bytes that are not UTF-8 survive).
        const stored = state.data.get(key)?.value ?? null;
        const bytes = stored === null ? null : Buffer.isBuffer(stored) ? stored : Buffer.from(stored, "utf8");
        const base64 = req.headers["upstash-encoding"] === "base64";
        state.gets.push({ base64 });
        return send(200, { result: bytes === null ? null : base64 ? bytes.toString("base64") : bytes.toString("utf8") });
      }
      if (name === "SET" && ex === "EX" && Number.isInteger(ttl)) {
        state.data.set(key, { value, ttl });
        return send(200, { result: "OK" });
      }
      return send(400, { error: "ERR syntax error" });
    });
  });
  server.keepAliveTimeout = 1000;
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    state,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  };
}
