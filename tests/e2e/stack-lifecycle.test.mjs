// The local stack's own process management (scripts/stack.sh), with stand-in services: a service
// whose leader exited but whose child lives on is still stopped whole; a part that died, or a
// worker that stopped answering while its process lives, stops the watch naming it; a log that
// grows without end is cut to its tail. Bounded in time and count; nothing outside loopback.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { ROOT } from "./procs.mjs";

function stack(script, env = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-stack-"));
  const r = spawnSync(
    "bash",
    ["-c", `source scripts/lib.sh; source scripts/stack.sh; STACK_DIR=${dir}; ${script}`],
    { cwd: ROOT, encoding: "utf8", timeout: 60_000, env: { ...process.env, ...env } },
  );
  return { code: r.status, out: `${r.stdout}${r.stderr}`, dir };
}

// Running, not a zombie waiting for a reaper (the test's own container may not reap).
const alive = (pid) => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    return !/^\d+ \(.*\) [ZX] /.test(stat);
  } catch {
    return false;
  }
};

test("stack_stop stops a service's children after its leader exited", () => {
  const r = stack(`
    # The child ignores SIGTERM (as a busy workerd may not stop in time): only SIGKILL ends it.
    spawn svc bash -c '(trap "" TERM; exec sleep 300) & echo $! > "$0/child.pid"; sleep 0.5' "$STACK_DIR"
    for _ in $(seq 50); do [ -s "$STACK_DIR/child.pid" ] && break; sleep 0.1; done
    sleep 1
    kill -0 "$(cat "$STACK_DIR/svc.pid")" 2>/dev/null && echo "leader alive" || echo "leader gone"
    stack_stop
  `);
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /leader gone/);
  const child = Number(fs.readFileSync(path.join(r.dir, "child.pid"), "utf8"));
  assert.ok(child > 0);
  assert.equal(alive(child), false, "the orphaned child was left running");
});

test("stack_watch names a part that died", () => {
  const r = stack(`
    spawn gone bash -c 'echo bye; exit 3'
    spawn up sleep 30
    sleep 0.5
    trap stack_stop EXIT
    stack_watch
  `);
  assert.notEqual(r.code, 0);
  assert.match(r.out, /gone exited/);
});

test("stack_watch stops a worker that no longer answers, after 3 looks", () => {
  const r = stack(`
    spawn worker sleep 30
    trap stack_stop EXIT
    for i in 1 2 3 4; do echo "look $i"; stack_watch http://127.0.0.1:1/healthz; done
  `);
  assert.notEqual(r.code, 0);
  assert.match(r.out, /look 3/);
  assert.doesNotMatch(r.out, /look 4/);
  assert.match(r.out, /stopped answering \(3 checks in a row\)/);
});

test("a log that grows without end is cut to its tail", () => {
  const r = stack(
    `
    spawn noisy bash -c 'line=$(head -c 4000 /dev/zero | tr "\\\\0" x); while :; do echo "$line"; done'
    trap stack_stop EXIT
    max=0
    for _ in $(seq 30); do
      sleep 0.1
      stack_watch
      size=$(stat -c %s "$STACK_DIR/noisy.log"); [ "$size" -gt "$max" ] && max=$size
    done
    echo "max $max"
    head -c 200 "$STACK_DIR/noisy.log" | head -n 1
  `,
    { STACK_LOG_MAX: String(2 << 20), STACK_LOG_KEEP: String(256 << 10) },
  );
  assert.equal(r.code, 0, r.out.slice(-2000));
  assert.match(r.out, /\[kvbench\] log cut: it passed 2097152 bytes/);
  const max = Number(r.out.match(/max (\d+)/)[1]);
  // Checked every 0.1 s: the log may pass the cap by what the writer adds between two looks.
  assert.ok(max < 64 << 20, `the log reached ${max} bytes`);
});
