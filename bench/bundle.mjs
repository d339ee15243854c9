// The benchmark worker's bundle accounted for: its wasm code and data by crate, and our own
// crates by module, from twiggy's per-item sizes of a build with function names (the same code
// as the shipped build, which only strips the names). Prints markdown tables for
// docs/measured.md, and the shipped bundle's raw and gzip size.
// Usage: node bench/bundle.mjs [--wasm FILE] [--top 25]
//   --wasm: account for this wasm (built with KVBENCH_WASM_NAMES=1) instead of building one.
// Needs twiggy (cargo install twiggy --version 0.8.0 --locked; this script says so if missing).
import { execFileSync, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { ROOT } from "../scripts/worker-options.mjs";

const { values } = parseArgs({ options: { wasm: { type: "string" }, top: { type: "string", default: "25" } } });
const top = Number(values.top);
if (!Number.isInteger(top) || top < 1) {
  console.error(`--top: expected a positive whole number, got ${values.top}`);
  process.exit(2);
}
if (spawnSync("twiggy", ["--version"]).status !== 0) {
  console.error("twiggy is missing: cargo install twiggy --version 0.8.0 --locked");
  process.exit(2);
}

const build = (names) =>
  execFileSync("bash", [path.join(ROOT, "scripts/build.sh"), "worker"], {
    env: { ...process.env, KVBENCH_SKIP_SETUP: "1", KVBENCH_WASM_NAMES: names ? "1" : "" },
    stdio: ["ignore", "ignore", "inherit"],
  });
const shipped = path.join(ROOT, "build/index_bg.wasm");
let named = values.wasm;
let tmp;
if (!named) {
  build(true);
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "kvbench-bundle-"));
  named = path.join(tmp, "named.wasm");
  fs.copyFileSync(shipped, named);
  // Back to the shipped build, for its size and for whoever runs the worker next.
  build(false);
}
const items = JSON.parse(execFileSync("twiggy", ["top", "-n", "1000000", "-f", "json", named], { encoding: "utf8", maxBuffer: 1 << 28 }));
if (tmp) fs.rmSync(tmp, { recursive: true, force: true });

/** The crate an item belongs to: the first path of its (demangled) name, inside `<…>` when the
 * name is an impl's (`<T as Trait>::f` counts for T's crate); data, tables and unnamed code by
 * kind. */
function crateOf(name) {
  if (/^data segment /.test(name)) return "(data segments: strings, tables)";
  if (/ subsection$|^"[^"]+" (sub)?section/.test(name)) return "(sections)";
  if (/^(code|func)\[\d+\]/.test(name)) return "(unnamed code)";
  if (/^(type|table|import|export|elem|global|memory)\b/.test(name)) return "(wasm structure)";
  if (/^__wbg|^__wbindgen/.test(name)) return "wasm_bindgen";
  const clean = name.replace(/\[[0-9a-f]{8,}\]/g, "");
  const m = clean.replace(/^<+/, "").match(/^([A-Za-z_][A-Za-z0-9_]*)::/);
  if (m) return m[1];
  // `<f64 as core::fmt::Display>::fmt`, `<&mut serde_json::…>`: the first crate path named.
  const any = clean.match(/([A-Za-z_][A-Za-z0-9_]*)::/);
  return any ? any[1] : "(other)";
}

/** Our own code by module: `kvbench_core::postgres`, `kvbench_worker::probes`. */
function moduleOf(name) {
  const m = name.replace(/^<+/, "").match(/^(kvbench_(?:core|worker|wire))::([a-z_0-9]+)/);
  return m ? `${m[1]}::${m[2]}` : null;
}

// The names the shipped build strips are not part of it.
const shippedItems = items.filter((i) => !/^"(function|data|local|type|global|elem|label|module) names" subsection$/.test(i.name) && i.name !== '"name" section');
const total = shippedItems.reduce((s, i) => s + i.shallow_size, 0);
const byCrate = new Map();
const byModule = new Map();
const other = [];
for (const i of shippedItems) {
  const c = crateOf(i.name);
  if (c === "(other)" && other.length < 8) other.push(i.name);
  byCrate.set(c, (byCrate.get(c) ?? 0) + i.shallow_size);
  const m = moduleOf(i.name);
  if (m) byModule.set(m, (byModule.get(m) ?? 0) + i.shallow_size);
}
const kib = (n) => (n / 1024).toFixed(1);
const pct = (n) => ((100 * n) / total).toFixed(1);
const table = (title, map) => {
  console.log(`\n| ${title} | KiB | % of the wasm |\n| --- | ---: | ---: |`);
  const rows = [...map].sort((a, b) => b[1] - a[1]);
  for (const [k, v] of rows.slice(0, top)) console.log(`| \`${k}\` | ${kib(v)} | ${pct(v)} |`);
  const rest = rows.slice(top).reduce((s, [, v]) => s + v, 0);
  if (rest) console.log(`| ${rows.length - top} more | ${kib(rest)} | ${pct(rest)} |`);
};
const wasm = fs.readFileSync(shipped);
// gzip -9, as scripts/build.sh measures it.
const gz = execFileSync("gzip", ["-9", "-c", shipped], { maxBuffer: 1 << 28 }).length;
console.log(`shipped: ${path.relative(ROOT, shipped)} ${kib(wasm.length)} KiB raw, ${kib(gz)} KiB gzip; accounted: ${kib(total)} KiB (the build with names, less its names)`);
table("crate", byCrate);
table("our module", byModule);
if (other.length && process.env.KVBENCH_BUNDLE_DEBUG) console.error("some of (other):", other);
