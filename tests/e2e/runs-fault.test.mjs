// A run whose keeps fail in some shards: every failed keep is counted, and the run's other answers
// are intact. The fault is injected without test code in the worker: Miniflare loads the built
// bundle behind a module that subclasses its real `RunArchive`, and the subclass answers 500 to
// every write (POST: append, failed) of the shards named in FAULT_SHARDS, as the real class
// answers when its insert throws; their reads work (they keep nothing).
// With 8 shards and #0 and #1 down, an append picked at #0 fails there and in #1 and is counted
// in #2; one picked at #1 moves to #2. Run `npm run build` first.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { spawn } from "node:child_process";
import { ROOT, sleep, startStackWithFaultyArchive } from "./procs.mjs";
import { BINDINGS } from "../../scripts/worker-options.mjs";

const KVBENCH_BIN = process.env.KVBENCH_BIN ?? path.join(ROOT, "target/debug/kvbench");
const RUN = `fault-${Date.now()}`;
const DOWN = [0, 1].map((k) => `run:${RUN}#${k}`);

// The entry module: the bundle as it is, plus the faulty subclass of its archive.
const FAULTY = `
import worker, * as all from "./index.js";
export * from "./index.js";
export default worker;
export class FaultyRunArchive extends all.RunArchive {
  constructor(state, env) {
    super(state, env);
    const down = (env.FAULT_SHARDS ?? "").split(",").filter(Boolean);
    this.down = down.some((name) => env.${BINDINGS.runs}.idFromName(name).equals(state.id));
  }
  fetch(request) {
    if (this.down && request.method === "POST") return new Response("injected: this shard's insert throws", { status: 500 });
    return super.fetch(request);
  }
}
`;

let mf;
let url;
before(async () => {
  mf = await startStackWithFaultyArchive(
    { STORES: "kv", RUN_SHARDS: "8", BENCH_OPEN: "true", PROBE_COLO_URL: "none", FAULT_SHARDS: DOWN.join(",") },
    "faulty.mjs",
    FAULTY,
  );
  url = (await mf.ready).toString().replace(/\/$/, "");
});
after(async () => {
  await mf?.dispose();
});

function kvbench(args) {
  return new Promise((resolve) => {
    const p = spawn(KVBENCH_BIN, args, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    p.stdout.on("data", (d) => (out += d));
    p.stderr.on("data", (d) => (out += d));
    p.on("close", (code) => resolve({ code, out }));
  });
}

test("keeps that fail in two shards are counted, and every other answer is kept", { timeout: 300_000 }, async () => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-fault-"));
  const imported = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-fault-import-"));
  try {
    const q = "stores=kv&min_bytes=1024&max_bytes=1024&keys=100";
    const sent = await kvbench(["run", "--url", `${url}/test?${q}`, "--rate", "100", "--duration", "5s", "--header", `Kvbench-Run: ${RUN}`, "--out", out]);
    assert.equal(sent.code, 0, sent.out);
    const report = JSON.parse(fs.readFileSync(path.join(out, "report.json"), "utf8"));
    const clientSide = ["not_sent", "timeout", "connect", "transport", "cancelled"];
    const byWorker = report.total.answered + Object.entries(report.total.failures)
      .filter(([k]) => !clientSide.includes(k))
      .reduce((n, [, v]) => n + v, 0);
    assert.ok(byWorker >= 100, `${byWorker} answers`);
    let end;
    let lines;
    for (let i = 0; i < 240; i++) {
      const res = await fetch(`${url}/runs/${RUN}/answers`);
      assert.equal(res.status, 200);
      lines = (await res.text()).split("\n").filter(Boolean).map((l) => JSON.parse(l));
      end = lines.pop();
      if (end.lines + end.keep_failed >= byWorker) break;
      await sleep(250);
    }
    assert.equal(end.end, true, JSON.stringify(end));
    assert.ok(end.keep_failed > 0, "appends picked at shard 0 failed twice");
    assert.equal(end.lines + end.keep_failed, byWorker, "every answer kept or counted, none twice");
    assert.equal(end.lines, lines.length);
    const shards = new Set(lines.map((l) => Math.floor(l.seq / 2 ** 40)));
    assert.ok(!shards.has(0) && !shards.has(1), `nothing kept in the shards down: ${[...shards]}`);
    assert.equal(new Set(lines.map((l) => l.seq)).size, lines.length, "seq unique");
    const broken = lines.filter((l) => !(l.answer?.stores?.kv && !l.failure));
    assert.deepEqual(broken.slice(0, 1), [], "the kept answers intact");

    const r = await kvbench(["import", "worker", url, "--run", RUN, "--out", imported]);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, new RegExp(`the worker says ${end.keep_failed} answer\\(s\\) could not be kept \\(keep_failed\\)`));
    const back = JSON.parse(fs.readFileSync(path.join(imported, "report.json"), "utf8"));
    assert.equal(back.runs[0].import.keep_failed, end.keep_failed);
    assert.equal(back.runs[0].import.lines, end.lines);
    assert.equal(back.total.answered, end.lines, "the import has every kept answer");
    console.log(`# ${byWorker} answers sent by the worker: ${end.lines} kept, ${end.keep_failed} counted as failed keeps`);
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
    fs.rmSync(imported, { recursive: true, force: true });
  }
});
