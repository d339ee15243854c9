// Miniflare's local Hyperdrive proxy, which wrangler dev (npm run dev) and scripts/serve-worker.mjs
// run in their own process, dies of a connection that workerd resets — a query in flight when an
// edit reloads the worker (cloudflare/workers-sdk#15768). scripts/hyperdrive-guard.cjs keeps it
// alive. Both halves are checked: the crash without the guard (so the test can fail, and says
// when an upgraded Miniflare makes the guard unnecessary) and the survival with it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { ROOT } from "./procs.mjs";

const CHILD = path.join(ROOT, "tests/e2e/hyperdrive-reload.mjs");
const GUARD = path.join(ROOT, "scripts/hyperdrive-guard.cjs");
const run = (args) => {
  const r = spawnSync(process.execPath, [...args, CHILD], { cwd: ROOT, encoding: "utf8", timeout: 120_000 });
  return { code: r.status, signal: r.signal, out: `${r.stdout}${r.stderr}` };
};

test("a Hyperdrive connection reset by a reload: Miniflare's process dies unguarded, lives with scripts/hyperdrive-guard.cjs", () => {
  const bare = run([]);
  assert.notEqual(bare.code, 0, `Miniflare survived the reset without the guard — fixed upstream? then scripts/hyperdrive-guard.cjs can go:\n${bare.out}`);
  assert.match(bare.out, /ECONNRESET|EPIPE/, bare.out);
  assert.doesNotMatch(bare.out, /the worker never connected/);

  const guarded = run(["--require", GUARD]);
  assert.equal(guarded.code, 0, guarded.out);
  assert.match(guarded.out, /alive after the reload/);
});
