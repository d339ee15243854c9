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

test("stack_watch names PostgreSQL when its server exited (pg_ctl's, by the PID it recorded)", () => {
  const r = stack(`
    # A stand-in for the server: scripts/postgres.sh records the postmaster's PID the same way.
    sleep 30 & echo $! >"$STACK_DIR/postgres.pid"; STACK_POSTGRES=1
    trap stack_stop EXIT
    stack_watch && echo "first look passed"
    kill "$(cat "$STACK_DIR/postgres.pid")"; wait || true
    stack_watch
  `);
  assert.notEqual(r.code, 0);
  assert.match(r.out, /first look passed/);
  assert.match(r.out, /postgres exited \(pid \d+\): stopping the stack/);
  assert.equal(fs.existsSync(path.join(r.dir, "postgres.pid")), false, "stack_stop forgets the server");
});

test("stack_watch stops a live worker that has not answered for STACK_HEALTH_DEAD_S, not sooner", () => {
  const r = stack(
    `
    spawn worker sleep 30
    trap stack_stop EXIT
    for i in 1 2 3 4 5 6 7 8; do echo "look $i"; stack_watch http://127.0.0.1:1/healthz; sleep 1; done
  `,
    { STACK_HEALTH_DEAD_S: "3", KVBENCH_BUILDS: fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-builds-")) },
  );
  assert.notEqual(r.code, 0);
  // Looks 1 s apart: the first failed look starts the count, the one 3 s later ends the stack.
  assert.match(r.out, /look 4/);
  assert.doesNotMatch(r.out, /look 6/);
  assert.match(r.out, /has not answered for [3-4] s while no build ran/);
});

test("stack_watch waits while a build runs, and counts again once it is over", () => {
  const builds = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-builds-"));
  const r = stack(
    `
    spawn worker sleep 60
    trap stack_stop EXIT
    # A build (as scripts/build.sh lists itself) for the first 5 s.
    sleep 5 & build=$!
    echo "$build" > "${builds}/$build"
    for i in $(seq 12); do
      echo "look $i"
      stack_watch http://127.0.0.1:1/healthz
      kill -0 "$build" 2>/dev/null || echo "build over at look $i"
      sleep 1
    done
  `,
    { STACK_HEALTH_DEAD_S: "3", KVBENCH_BUILDS: builds },
  );
  assert.notEqual(r.code, 0);
  const over = Number(r.out.match(/build over at look (\d+)/)[1]);
  const last = Math.max(...[...r.out.matchAll(/look (\d+)/g)].map((m) => Number(m[1])));
  // Alive through the build (5 looks) although nothing answered, then stopped ~3 s after it.
  assert.ok(over >= 5, r.out);
  assert.ok(last >= over + 2 && last <= over + 5, r.out);
  assert.match(r.out, /has not answered for [3-5] s while no build ran/);
  assert.deepEqual(fs.readdirSync(builds), [], "the listing of a finished build is removed");
});

test("stack_watch counts a slow answer as an answer", async () => {
  // A server that answers after 2 s, every time: looks with a 5 s wait never stop the stack.
  const http = await import("node:http");
  const server = http.createServer((_, res) => setTimeout(() => res.end("ok"), 2000));
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  const port = server.address().port;
  const { spawn } = await import("node:child_process");
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-stack-"));
  const child = spawn(
    "bash",
    ["-c", `source scripts/lib.sh; source scripts/stack.sh; STACK_DIR=${dir}; spawn worker sleep 30; trap stack_stop EXIT
      for i in 1 2 3 4; do stack_watch http://127.0.0.1:${port}/healthz; done; echo survived`],
    { cwd: ROOT, env: { ...process.env, STACK_HEALTH_DEAD_S: "1", STACK_HEALTH_TIMEOUT_S: "5" } },
  );
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  const code = await new Promise((ok) => child.on("exit", ok));
  server.close();
  assert.equal(code, 0, out);
  assert.match(out, /survived/);
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
