// Cold start under workerd: from a new isolate to its first answer, for the benchmark worker
// (build/, its first `/test?stores=kv`), its fleet member build (build-member/, the same), a
// workers-rs "hello world" of the same worker and
// wasm-bindgen versions (bench/hello-rs, built like ours) and the JS floor worker
// (bench/floor-worker.js, its first `/?stores=kv`), side by side in one run: each round starts
// each of them once in a new Miniflare (a new workerd process, so a new isolate that compiles
// its script and wasm), in an order that alternates round by round, and times
//   start  — `newMiniflare(...)` until it is ready (workerd up, the script and wasm compiled),
//   first  — from ready to the first answer read whole (the module's instantiation and start,
//            the first request),
//   total  — the two together: what a new isolate costs before it answers.
// `start` also holds Miniflare's local services for each worker's bindings: the three have the
// same KV, D1 and R2 bindings; ours has three Durable Object classes, the floor one, the hello
// world none.
// It prints the medians (with their range) and each worker's shipped wasm size. Loopback only;
// every loop is bounded by --rounds.
// Usage: node bench/cold.mjs [--rounds 9]   (builds what is missing first: scripts/build.sh
//        worker, member and hello)
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { compatibilityDate, newMiniflare, ROOT, workerOptions } from "../scripts/worker-options.mjs";
import { floorOptions } from "./floor.mjs";

const { values } = parseArgs({ options: { rounds: { type: "string", default: "9" } } });
const ROUNDS = Number(values.rounds);
if (!Number.isInteger(ROUNDS) || ROUNDS < 1 || ROUNDS > 50) {
  console.error("--rounds: expected a whole number 1..50");
  process.exit(2);
}

for (const what of ["worker", "member", "hello"]) {
  execFileSync("bash", [path.join(ROOT, "scripts/build.sh"), what], { stdio: ["ignore", "ignore", "inherit"], env: { ...process.env, KVBENCH_SKIP_SETUP: "1" } });
}

const vars = { BENCH_OPEN: "true", STORES: "kv" };
const HELLO = path.join(ROOT, "bench/hello-rs/build");
const workers = [
  { name: "kvbench /test?stores=kv", options: () => workerOptions(vars), path: "/test?stores=kv&key=cold", wasm: path.join(ROOT, "build/index_bg.wasm") },
  {
    // The fleet member's build: the same /test without the operations plane. Its two Durable
    // Object bindings are the main worker's (by script name) when deployed; `stores=kv` needs
    // neither, so it starts here with no class at all.
    name: "kvbench member build",
    options: () => ({ ...workerOptions(vars), scriptPath: path.join(ROOT, "build-member/index.js"), modulesRoot: path.join(ROOT, "build-member"), durableObjects: {} }),
    path: "/test?stores=kv&key=cold",
    wasm: path.join(ROOT, "build-member/index_bg.wasm"),
  },
  {
    name: "workers-rs hello world",
    options: () => ({
      modules: true,
      scriptPath: path.join(HELLO, "index.js"),
      modulesRoot: HELLO,
      modulesRules: [
        { type: "ESModule", include: ["**/*.js"] },
        { type: "CompiledWasm", include: ["**/*.wasm"] },
      ],
      compatibilityDate: compatibilityDate(),
      // The floor's bindings (unused), so that each worker's start sets up the same local
      // services but for the Durable Object classes (ours 3, the floor 1, this one none).
      kvNamespaces: ["BENCH_KV"],
      d1Databases: ["BENCH_D1"],
      r2Buckets: ["BENCH_R2"],
    }),
    path: "/",
    wasm: path.join(HELLO, "index_bg.wasm"),
  },
  { name: "JS floor /?stores=kv", options: () => floorOptions(vars), path: "/?stores=kv&key=cold" },
];

/** One cold start of `w`: { start, first } in ms. */
async function once(w) {
  const t0 = performance.now();
  const mf = newMiniflare({ ...w.options(), host: "127.0.0.1", port: 0 });
  try {
    const url = (await mf.ready).toString().replace(/\/$/, "");
    const ready = performance.now();
    const res = await fetch(`${url}${w.path}`);
    const body = await res.text();
    const first = performance.now();
    if (!res.ok) throw new Error(`${w.name}: HTTP ${res.status} ${body.slice(0, 300)}`);
    return { start: ready - t0, first: first - ready };
  } finally {
    await mf.dispose();
  }
}

const results = workers.map(() => []);
// Not counted: the first start of each (the disk cache, the node modules loading).
for (const w of workers) await once(w);
for (let round = 0; round < ROUNDS; round++) {
  const order = round % 2 === 0 ? [...workers.keys()] : [...workers.keys()].reverse();
  for (const i of order) results[i].push(await once(workers[i]));
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const cell = (xs) => `${median(xs).toFixed(0)} (${Math.min(...xs).toFixed(0)}-${Math.max(...xs).toFixed(0)})`;
const size = (file) => {
  if (!file) return "-";
  const raw = fs.statSync(file).size;
  const gz = Number(execFileSync("bash", ["-c", 'gzip -9 -c "$1" | wc -c', "_", file]).toString());
  return `${(raw / 1024).toFixed(0)} / ${(gz / 1024).toFixed(0)}`;
};
console.log(`\ncold start under workerd (Miniflare), ${ROUNDS} rounds in alternating order, medians (range), ms:\n`);
console.log(`${"worker".padEnd(28)} ${"start".padStart(16)} ${"first answer".padStart(16)} ${"total".padStart(16)} ${"wasm KiB raw / gzip".padStart(20)}`);
for (const [i, w] of workers.entries()) {
  const r = results[i];
  const total = r.map((x) => x.start + x.first);
  console.log(
    `${w.name.padEnd(28)} ${cell(r.map((x) => x.start)).padStart(16)} ${cell(r.map((x) => x.first)).padStart(16)} ${cell(total).padStart(16)} ${size(w.wasm).padStart(20)}`,
  );
}
