#!/usr/bin/env node
// The one parser of a postgres:// URL for the scripts (scripts/deploy-inputs.mjs checks
// POSTGRES_URL with it before a deploy touches anything; scripts/postgres.sh hands its parts to
// psql; scripts/resources.mjs redacts its password). A URL that cannot be parsed is refused with a
// reason and the name of the variable it came from — never with the URL, which holds a password:
// Node's own `new URL()` error carries its input and an uncaught one prints it whole.
//
// As a script: `PG_URL_IN=... node scripts/pg-url.mjs libpq [NAME]` prints libpq's variables
// (PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE, and PGSSLMODE ... from the query), each
// `K=V` ended by a NUL, or exits 2 with the reason on stderr, naming NAME (default POSTGRES_URL).
import path from "node:path";
import { fileURLToPath } from "node:url";

/** A refusal whose message never contains the URL. */
export class PgUrlError extends Error {}

/** The query parameters libpq also reads from its environment. */
const LIBPQ_PARAMS = { sslmode: "PGSSLMODE", sslrootcert: "PGSSLROOTCERT", options: "PGOPTIONS", application_name: "PGAPPNAME", connect_timeout: "PGCONNECT_TIMEOUT" };

const ENCODE_HINT = "a '/', '#', '?', '@' or ':' in the user name or password must be percent-encoded (%2F, %23, %3F, %40, %3A)";

/**
 * The parts of `text`, a postgres:// (or postgresql://) URL, percent-decoded; `name` is the
 * variable it came from, for the message. `requirePassword`: Hyperdrive needs one.
 */
export function parsePostgresUrl(text, name = "POSTGRES_URL", { requirePassword = false } = {}) {
  const refuse = (why) => {
    throw new PgUrlError(`${name} is not a usable postgres:// URL (its value is not shown: it may hold a password): ${why}`);
  };
  const s = String(text ?? "");
  if (!s.trim()) refuse("it is empty");
  if (/[\s\x00-\x1f\x7f]/.test(s)) refuse("it contains whitespace or a control character");
  if (!/^postgres(ql)?:\/\//i.test(s)) refuse("it does not start with postgres:// or postgresql://");
  let u;
  try {
    u = new URL(s);
  } catch {
    refuse(`Node's URL parser refuses it; ${ENCODE_HINT}`);
  }
  // A '#' or an unencoded '/' in the password can still parse, as something else: a fragment,
  // or the host taken from the user name and the rest of the password in the path.
  if (u.hash) refuse(`it has a '#' fragment; ${ENCODE_HINT}`);
  if (u.pathname.includes("@")) refuse(`its path has an '@' (the password was cut at a '/'); ${ENCODE_HINT}`);
  if (!u.hostname) refuse("it has no host");
  if (!u.username) refuse("it has no user name");
  if (requirePassword && !u.password) refuse("it has no password (Hyperdrive needs one)");
  const decode = (part, what) => {
    try {
      return decodeURIComponent(part);
    } catch {
      return refuse(`its ${what} has a '%' that is not a percent-encoded byte`);
    }
  };
  const database = decode(u.pathname.replace(/^\//, ""), "database name");
  if (database.includes("/")) refuse("its path has more than one segment (one database name)");
  const params = {};
  for (const [k, v] of u.searchParams) params[k] = v;
  return {
    host: u.hostname.replace(/^\[|\]$/g, ""),
    port: u.port || "5432",
    user: decode(u.username, "user name"),
    password: decode(u.password, "password"),
    database,
    params,
  };
}

/** libpq's environment for `parts` (the database defaults to the user's name, as libpq's does). */
export function libpqEnv(parts) {
  const out = { PGHOST: parts.host, PGPORT: parts.port, PGUSER: parts.user, PGPASSWORD: parts.password, PGDATABASE: parts.database || parts.user };
  for (const [k, v] of Object.entries(parts.params)) if (LIBPQ_PARAMS[k]) out[LIBPQ_PARAMS[k]] = v;
  return Object.fromEntries(Object.entries(out).filter(([, v]) => v));
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const [mode, name = "POSTGRES_URL"] = process.argv.slice(2);
  if (mode !== "libpq") {
    console.error("usage: PG_URL_IN=... node scripts/pg-url.mjs libpq [NAME]");
    process.exit(2);
  }
  try {
    const env = libpqEnv(parsePostgresUrl(process.env.PG_URL_IN, name));
    for (const [k, v] of Object.entries(env)) process.stdout.write(`${k}=${v}\0`);
  } catch (e) {
    console.error(e instanceof PgUrlError ? e.message : `${name}: could not be read`);
    process.exit(2);
  }
}
