// Miniflare's local Hyperdrive proxy, which wrangler dev (npm run dev) and scripts/serve-worker.mjs
// run in their own process, died of a connection that workerd resets — a query in flight when an
// edit reloads the worker (cloudflare/workers-sdk#15768, Miniflare 4). The stack carried a guard
// against it; Miniflare 5 (wrangler 4.164's) survives the reset, so the guard is gone and this
// test keeps the survival checked: the child holds a connection with unread bytes through a
// reload (a reset, not a clean close) and must still be alive after it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { ROOT } from "./procs.mjs";

const CHILD = path.join(ROOT, "tests/e2e/hyperdrive-reload.mjs");

test("a Hyperdrive connection reset by a reload leaves Miniflare's process running", () => {
  const r = spawnSync(process.execPath, [CHILD], { cwd: ROOT, encoding: "utf8", timeout: 120_000 });
  const out = `${r.stdout}${r.stderr}`;
  assert.doesNotMatch(out, /the worker never connected/, out);
  assert.equal(r.status, 0, out);
  assert.match(out, /alive after the reload/, out);
});
