// The in-workerd wasm test runner (scripts/wasm-test-runner.mjs) behaves like a test runner: a
// failing test fails the run with its name, message and panic text; a hung test is stopped
// after the timeout with its name; the name filter and --nocapture work. Drives the real
// `cargo test --target wasm32-unknown-unknown` (built by the earlier wasm step of npm test).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { ROOT } from "./procs.mjs";

function cargoTest(args, env = {}) {
  const r = spawnSync(
    "cargo",
    ["test", "-p", "kvbench-worker", "--lib", "--target", "wasm32-unknown-unknown", "--locked", "--", ...args],
    { cwd: ROOT, env: { ...process.env, ...env }, encoding: "utf8", timeout: 600_000 },
  );
  return { code: r.status, out: `${r.stdout}\n${r.stderr}` };
}

test("a passing filtered run is green and names only the selected test", () => {
  const { code, out } = cargoTest(["runner_selftest"]);
  assert.equal(code, 0, out);
  assert.match(out, /running 1 test \(inside workerd/);
  assert.match(out, /test binding_tests::runner_selftest \.\.\. ok/);
  assert.match(out, /test result: ok\. 1 passed; 0 failed; 0 ignored; 0 measured; \d+ filtered out/);
  assert.doesNotMatch(out, /kv_miss_put_hit/);
});

test("a deliberately failing test fails the run with its name and panic text", () => {
  const { code, out } = cargoTest(["runner_selftest"], { WASM_TEST_VAR_KVBENCH_RUNNER_SELFTEST: "fail" });
  assert.notEqual(code, 0, out);
  assert.match(out, /test binding_tests::runner_selftest \.\.\. FAILED/);
  assert.match(out, /---- binding_tests::runner_selftest ----/);
  assert.match(out, /deliberate failure \(KVBENCH_RUNNER_SELFTEST=fail\)/);
  assert.match(out, /test result: FAILED\. 0 passed; 1 failed/);
});

test("a hung test is stopped after the timeout, by name, and the run fails", () => {
  const started = Date.now();
  const { code, out } = cargoTest(["runner_selftest"], {
    WASM_TEST_VAR_KVBENCH_RUNNER_SELFTEST: "hang",
    KVBENCH_WASM_TEST_TIMEOUT_S: "3",
  });
  assert.notEqual(code, 0, out);
  assert.match(out, /test binding_tests::runner_selftest did not finish within 3 s/);
  assert.match(out, /test binding_tests::runner_selftest \.\.\. FAILED/);
  assert.ok(Date.now() - started < 120_000, "stopped, not waited for");
});

test("--nocapture shows a test's console output; without it a passing test's output is hidden", () => {
  const env = { WASM_TEST_VAR_KVBENCH_RUNNER_SELFTEST: "print" };
  const shown = cargoTest(["runner_selftest", "--nocapture"], env);
  assert.equal(shown.code, 0, shown.out);
  assert.match(shown.out, /selftest says hello/);
  const hidden = cargoTest(["runner_selftest"], env);
  assert.equal(hidden.code, 0, hidden.out);
  assert.doesNotMatch(hidden.out, /selftest says hello/);
});

test("--list lists without running", () => {
  const { code, out } = cargoTest(["--list"]);
  assert.equal(code, 0, out);
  assert.match(out, /binding_tests::do_read_of_a_new_object_writes_nothing: test/);
  assert.doesNotMatch(out, /test result/);
});
