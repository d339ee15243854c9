// A run shard's alarm chain under storage faults, in workerd: a first arm that fails is retried by
// the next write, and an alarm whose expiry fails counts it and re-arms (a throwing alarm would be
// retried a bounded number of times and then dropped, keeping the shard for ever). The faults are
// injected without test code in the worker: Miniflare loads the built bundle behind a module that
// subclasses its real `RunArchive` and hands it a storage whose `setAlarm` throws the next
// `arms` times and whose SQL refuses the expiry's DELETE while `deletes` is set; the subclass
// also answers the test's reads of the alarm and the stored `shard` state. Run `npm run build`
// first.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { sleep, startStackWithFaultyArchive } from "./procs.mjs";
import { BINDINGS } from "../../scripts/worker-options.mjs";

// The entry module: the bundle as it is, plus the archive over a faulty storage.
const FAULTY = `
import worker, * as all from "./index.js";
export * from "./index.js";
export default worker;
const bound = (target, prop) => {
  const v = Reflect.get(target, prop, target);
  return typeof v === "function" ? v.bind(target) : v;
};
export class FaultyRunArchive extends all.RunArchive {
  constructor(state, env) {
    const faults = { arms: 0, deletes: false };
    const sql = new Proxy(state.storage.sql, {
      get(target, prop) {
        if (prop !== "exec") return bound(target, prop);
        return (query, ...args) => {
          if (faults.deletes && query.startsWith("DELETE FROM kept")) throw new Error("injected: the expiry's delete throws");
          return target.exec(query, ...args);
        };
      },
    });
    const storage = new Proxy(state.storage, {
      get(target, prop) {
        if (prop === "sql") return sql;
        if (prop !== "setAlarm") return bound(target, prop);
        return async (...args) => {
          if (faults.arms > 0) {
            faults.arms -= 1;
            throw new Error("injected: setAlarm throws");
          }
          return target.setAlarm(...args);
        };
      },
    });
    super(new Proxy(state, { get: (target, prop) => (prop === "storage" ? storage : bound(target, prop)) }), env);
    this.faults = faults;
    this.real = state.storage;
  }
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname === "/fault") {
      this.faults.arms = Number(url.searchParams.get("arms") ?? 0);
      this.faults.deletes = url.searchParams.get("deletes") === "1";
      return Response.json(this.faults);
    }
    if (url.pathname === "/alarm") return Response.json(await this.real.getAlarm());
    if (url.pathname === "/shard") return Response.json(JSON.parse((await this.real.get("shard")) ?? "null"));
    return super.fetch(request);
  }
}
`;

let mf;
before(async () => {
  mf = await startStackWithFaultyArchive(
    { STORES: "kv", BENCH_OPEN: "true", PROBE_COLO_URL: "none" },
    "faulty-alarm.mjs",
    FAULTY,
  );
  await mf.ready;
});
after(async () => {
  await mf?.dispose();
});

test("a shard's failed first arm is retried by the next write, and a failed expiry is counted and re-armed", { timeout: 60_000 }, async () => {
  const ns = await mf.getDurableObjectNamespace(BINDINGS.runs);
  const shard = ns.get(ns.idFromName(`run:alarm-${Date.now()}#0`));
  const call = async (path, init) => {
    const res = await shard.fetch(`http://object${path}`, init);
    const text = await res.text();
    assert.ok(res.ok, `${path}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : null;
  };
  // An answer long expired under a keep of 60 s: the alarm that deletes it is due at once.
  const old = Date.now() - 2 * 86_400_000;
  const append = (n) => call("/append?keep=60", { method: "POST", body: `${old + n}\t{"t_ms":${old + n}}\n` });

  await call("/fault?arms=1");
  await append(0);
  assert.equal(await call("/alarm"), null, "the first arm failed; the append is kept all the same");
  assert.equal((await call("/status")).kept, 1);

  // The expiry's delete fails from now on; the next write arms again.
  await call("/fault?arms=0&deletes=1");
  const armedAt = Date.now();
  await append(1);
  const alarm = await call("/alarm");
  assert.ok(alarm !== null && alarm >= armedAt && alarm < armedAt + 10_000, `re-armed by the next write: ${alarm}`);

  // The alarm fires, its delete throws: counted, and the chain goes on.
  let state;
  for (let i = 0; i < 40; i++) {
    await sleep(250);
    state = await call("/shard");
    if (state?.expire_failed >= 2) break;
  }
  assert.ok(state?.expire_failed >= 2, `failed expiries counted, each re-armed: ${JSON.stringify(state)}`);
  assert.equal(state.keep_s, 60);
  assert.notEqual(await call("/alarm"), null, "never the end of the chain");
  assert.equal((await call("/status")).kept, 2);

  // The delete works again: the next wake deletes both, and with nothing kept no alarm is left.
  await call("/fault?arms=0&deletes=0");
  let kept;
  for (let i = 0; i < 40; i++) {
    await sleep(250);
    kept = (await call("/status")).kept;
    if (kept === 0) break;
  }
  assert.equal(kept, 0, "the expired answers deleted once the delete works");
  assert.equal(await call("/alarm"), null, "nothing kept: no alarm");
});
