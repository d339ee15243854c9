// What one read of the probes asks of the Durable Objects, counted in the objects themselves:
// with OBJECT_CALL_LOG = "true" every probe object, run archive shard and the fleet directory
// logs each call it answers (`kvbench-object-call <class> <method> <path>`,
// src/operations/object.rs), and Miniflare hands workerd's log lines to this test. 14 probes
// (the 11 location hints and 3 FLEET members), nothing started: one `GET /probes` reads each
// status once and the directory once, and writes nothing; `/probes/answers`, `/report` and
// `/runs/<id>/answers` write nothing either and read each status at most once; `POST
// /probes/start` reads each status once before it arms. Run `npm run build` first
// (scripts/test.sh does).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { sleep, startStack } from "./procs.mjs";

const HINTS = "wnam,enam,sam,weur,eeur,apac,apac-ne,apac-se,oc,afr,me";
const FLEET = "local-1=http://127.0.0.1:9,local-2=http://127.0.0.1:9,local-3=http://127.0.0.1:9";
const PROBES = 14;
const PREFIX = "kvbench-object-call ";

let mf;
const calls = [];

before(async () => {
  mf = await startStack(
    {
      STORES: "kv",
      PROBE_HINTS: HINTS,
      FLEET,
      PROBE_COLO_URL: "none",
      BENCH_OPEN: "true",
      PROBE_BUDGET_USD: "1000000",
      OBJECT_CALL_LOG: "true",
    },
    {
      handleStructuredLogs(log) {
        const at = log.message.indexOf(PREFIX);
        if (at >= 0) calls.push(log.message.slice(at + PREFIX.length).trim());
      },
    },
  );
});
after(async () => {
  await mf?.dispose();
});

/** The object calls `method path` makes: the calls logged from its start until the log is
 * quiet for half a second after its answer (workerd's log lines arrive after the response). */
async function counted(method, path) {
  const from = calls.length;
  const res = await mf.dispatchFetch(`http://localhost${path}`, { method });
  const body = await res.text();
  let seen = -1;
  while (seen !== calls.length) {
    seen = calls.length;
    await sleep(500);
  }
  return { status: res.status, body, calls: calls.slice(from) };
}

const tally = (list) => {
  const by = {};
  for (const c of list) by[c] = (by[c] ?? 0) + 1;
  return by;
};

test("one GET /probes with 14 probes reads each status once and the directory once, and writes nothing", async () => {
  // The objects' first calls (the tables, the isolate) are not this count's concern.
  await counted("GET", "/probes");
  const { status, body, calls: made } = await counted("GET", "/probes");
  assert.equal(status, 200, body);
  assert.equal(JSON.parse(body).probes.length, PROBES);
  console.log(`GET /probes, ${PROBES} probes: ${made.length} object calls ${JSON.stringify(tally(made))}`);
  assert.deepEqual(tally(made), { "probe GET /status": PROBES, "directory GET /members": 1 }, made.join("\n"));
  assert.equal(made.length, PROBES + 1);
});

test("the other reads write nothing and read each status at most once", async () => {
  for (const path of ["/probes/answers", "/report?window=1h", "/report?window=1h&format=json", "/runs/never-kept/answers"]) {
    const { status, body, calls: made } = await counted("GET", path);
    assert.ok(status === 200 || status === 404, `${path}: ${status} ${body.slice(0, 200)}`);
    console.log(`GET ${path}: ${made.length} object calls ${JSON.stringify(tally(made))}`);
    assert.deepEqual(made.filter((c) => !c.split(" ").includes("GET")), [], `${path} wrote`);
    assert.ok((tally(made)["probe GET /status"] ?? 0) <= PROBES, `${path}: ${made.join("\n")}`);
  }
});

test("POST /probes/start reads each status once, then arms each probe once", async () => {
  const { status, body, calls: made } = await counted("POST", "/probes/start");
  assert.equal(status, 200, body);
  console.log(`POST /probes/start, ${PROBES} probes: ${made.length} object calls ${JSON.stringify(tally(made))}`);
  const by = tally(made);
  assert.equal(by["probe GET /status"], PROBES, made.join("\n"));
  assert.equal(by["probe POST /start"], PROBES, made.join("\n"));
  // The members it arms, recorded in the directory (a write: this is a start).
  assert.equal(by["directory POST /members"], 1, made.join("\n"));
  const stopped = await mf.dispatchFetch("http://localhost/probes/stop", { method: "POST" });
  assert.equal(stopped.status, 200, await stopped.text());
});
