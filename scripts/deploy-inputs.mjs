#!/usr/bin/env node
// What `npm run deploy` is given, checked before it builds, creates or uploads anything: a deploy
// that would fail (or worse, succeed and serve 500s) because of an input stops here, with a
// message naming the variable and never quoting a secret.
//  - FLEET_REGIONS: all, none, a count, or a comma list of known region ids, each once
//    (scripts/fleet.mjs selectRegions);
//  - BENCH_TOKEN: what the workers compare with `Authorization: Bearer <token>` — printable ASCII
//    without whitespace (a header value cannot carry a control or non-ASCII character, and fetch
//    trims spaces at its ends); a token is refused, never rewritten;
//  - POSTGRES_URL, when given: parsed once (scripts/pg-url.mjs), with a password (Hyperdrive).
// Usage: BENCH_TOKEN=... [KVBENCH_TOKEN_FROM=where] node scripts/deploy-inputs.mjs
// Exits 2 listing every problem; prints nothing when all is well.
import path from "node:path";
import { fileURLToPath } from "node:url";
import { RegionsError, selectRegions } from "./fleet.mjs";
import { PgUrlError, parsePostgresUrl } from "./pg-url.mjs";

/** Why `token` cannot be a BENCH_TOKEN (its characters by position and kind, never the token),
 * or null. `from` says where it came from. */
export function tokenProblem(token, from = "the environment") {
  const t = String(token ?? "");
  if (!t) return `BENCH_TOKEN (${from}) is empty`;
  for (let i = 0; i < t.length; i++) {
    const c = t.charCodeAt(i);
    if (c >= 0x21 && c <= 0x7e) continue;
    const kind = c === 0x20 ? "a space" : c === 0x09 ? "a tab" : c === 0x0a || c === 0x0d ? "a line break" : c < 0x20 || c === 0x7f ? "a control character" : "a non-ASCII character";
    return `BENCH_TOKEN (${from}) has ${kind} at character ${i + 1} of ${t.length}: it is sent as 'Authorization: Bearer <token>', so it must be printable ASCII without whitespace (e.g. openssl rand -hex 32); it is refused, not rewritten`;
  }
  return null;
}

/** Every problem of the deploy's inputs in `env`, as messages (empty: all is well). */
export function inputProblems(env) {
  const problems = [];
  try {
    selectRegions(env.FLEET_REGIONS ?? "all", "FLEET_REGIONS");
  } catch (e) {
    if (!(e instanceof RegionsError)) throw e;
    problems.push(e.message);
  }
  const token = tokenProblem(env.BENCH_TOKEN, env.KVBENCH_TOKEN_FROM ?? "the environment");
  if (token) problems.push(token);
  if (env.POSTGRES_URL) {
    try {
      parsePostgresUrl(env.POSTGRES_URL, "POSTGRES_URL", { requirePassword: true });
    } catch (e) {
      problems.push(e instanceof PgUrlError ? e.message : "POSTGRES_URL could not be read");
    }
  }
  return problems;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const problems = inputProblems(process.env);
  for (const p of problems) console.error(`[kvbench] error: ${p}`);
  if (problems.length) process.exit(2);
}
