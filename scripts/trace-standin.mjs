// A stand-in for Cloudflare's trace (https://www.cloudflare.com/cdn-cgi/trace) on loopback, so the
// local stack and the e2e suites run the path that tells where code ran: each worker is pointed
// (PROBE_COLO_URL) at a path of its own, `/<name>/cdn-cgi/trace`, answered with the colo given
// for that name as the real trace writes it (`key=value` lines, `colo=XXX` among them). A name
// given `!500` is answered 500 (a trace that fails: its colo is unknown). Every ask is counted
// per name (`asked`), so a test can hold the workers to how often they ask.
//
// Usage: node scripts/trace-standin.mjs --port 9999 main=LOC local-1=L01 local-2=L02
import http from "node:http";
import { parseArgs } from "node:util";
import { pathToFileURL } from "node:url";

/** Starts the stand-in on 127.0.0.1:`port` (0: any) answering `colos` ({name: colo}); resolves
 * to `{ url(name), asked, server }`. */
export async function startTraceStandIn(colos, port = 0) {
  const asked = {};
  const server = http.createServer((req, res) => {
    req.socket.setNoDelay(true);
    const match = /^\/([^/]+)\/cdn-cgi\/trace$/.exec(req.url ?? "");
    const name = match ? decodeURIComponent(match[1]) : null;
    const colo = name === null ? undefined : colos[name];
    if (colo === undefined) {
      res.writeHead(404, { "content-type": "text/plain" });
      res.end("no such trace\n");
      return;
    }
    asked[name] = (asked[name] ?? 0) + 1;
    if (colo === "!500") {
      res.writeHead(500, { "content-type": "text/plain" });
      res.end("trace failed\n");
      return;
    }
    const body = `fl=0f0\nh=127.0.0.1\nip=127.0.0.1\nts=${Date.now() / 1000}\nvisit_scheme=http\nuag=kvbench\ncolo=${colo}\nhttp=http/1.1\nloc=XX\ntls=off\n`;
    res.writeHead(200, { "content-type": "text/plain", "content-length": Buffer.byteLength(body) });
    res.end(body);
  });
  await new Promise((ok, fail) => {
    server.once("error", fail);
    server.listen(port, "127.0.0.1", ok);
  });
  const base = `http://127.0.0.1:${server.address().port}`;
  return { server, asked, url: (name) => `${base}/${encodeURIComponent(name)}/cdn-cgi/trace` };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const { values, positionals } = parseArgs({ options: { port: { type: "string", default: "0" } }, allowPositionals: true });
  const colos = Object.fromEntries(positionals.map((p) => p.split("=", 2)));
  const { url } = await startTraceStandIn(colos, Number(values.port));
  for (const name of Object.keys(colos)) console.log(`${name}: ${url(name)} answers colo=${colos[name]}`);
}
