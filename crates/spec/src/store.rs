//! One description per store (wire id, namespace, limits, billing units, bindings, what its time
//! includes) that parameters, `/`, `docs/stores.md` and the cost table all read.

use serde::{Serialize, Serializer};

/// Deno KV's limit on an encoded key in a write (`denokv_proto::limits::MAX_WRITE_KEY_SIZE_BYTES`);
/// measured in the tuple encoding (`kvbench_core::stores::denokv::key`, [`KeyEncoding::DenoTuple`]).
pub const DENO_KV_KEY_MAX_BYTES: u32 = 2048;
/// Deno KV's limit on one value's bytes (`denokv_proto::limits::MAX_VALUE_SIZE_BYTES`).
pub const DENO_KV_VALUE_MAX_BYTES: u64 = 65_536;

/// The stores this benchmark knows. The wire id ([`StoreId::as_str`]) is what appears in
/// `stores`, `order` and the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StoreId {
    Kv,
    Upstash,
    DenoKv,
    Do,
    D1,
    R2,
    Cache,
    Redis,
    Postgres,
    Hyperdrive,
}

impl StoreId {
    /// Every store, in the order of [`STORES`].
    pub const ALL: [StoreId; 10] = [
        StoreId::Kv,
        StoreId::Upstash,
        StoreId::DenoKv,
        StoreId::Do,
        StoreId::D1,
        StoreId::R2,
        StoreId::Cache,
        StoreId::Redis,
        StoreId::Postgres,
        StoreId::Hyperdrive,
    ];

    /// The stores measured when neither `stores=` nor `STORES` says: all but the two Postgres
    /// ones, which need a database the user brings.
    pub const DEFAULT: [StoreId; 8] = [
        StoreId::Kv,
        StoreId::Upstash,
        StoreId::DenoKv,
        StoreId::Do,
        StoreId::D1,
        StoreId::R2,
        StoreId::Cache,
        StoreId::Redis,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            StoreId::Kv => "kv",
            StoreId::Upstash => "upstash",
            StoreId::DenoKv => "denokv",
            StoreId::Do => "do",
            StoreId::D1 => "d1",
            StoreId::R2 => "r2",
            StoreId::Cache => "cache",
            StoreId::Redis => "redis",
            StoreId::Postgres => "postgres",
            StoreId::Hyperdrive => "hyperdrive",
        }
    }

    pub fn parse(name: &str) -> Option<StoreId> {
        StoreId::ALL.into_iter().find(|id| id.as_str() == name)
    }

    /// This store's description.
    #[allow(clippy::indexing_slicing)] // STORES holds one entry per StoreId, in order (tested)
    pub fn spec(self) -> &'static StoreSpec {
        &STORES[self as usize]
    }
}

/// An answer names its stores by [`StoreId`]; Cloudflare KV's and Upstash's reads are also
/// mirrored in the answer's legacy fields.
impl kvbench_wire::answer::StoreName for StoreId {
    fn legacy(&self) -> Option<kvbench_wire::answer::Legacy> {
        use kvbench_wire::answer::Legacy;
        match self {
            StoreId::Kv => Some(Legacy::Kv),
            StoreId::Upstash => Some(Legacy::Redis),
            _ => None,
        }
    }
}

impl Serialize for StoreId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Every key of a namespaced store starts with this and a fixed `key` may not, so a store
/// without a namespace (Upstash) never reads a namespaced one's entries in the same database.
pub const RESERVED_PREFIX: &str = "kvbench:";

/// How a store measures the key its limit applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyEncoding {
    /// The key's UTF-8 bytes (namespace included).
    Bytes,
    /// Deno KV's tuple encoding of `[key]`: the bytes plus 2, plus 1 per NUL.
    DenoTuple,
}

/// How many of a billing unit one operation costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Count {
    /// This many units per operation, hit or miss.
    Each(u32),
    /// `max(1, ceil(value_bytes / n))` units: a miss (0 bytes) costs one.
    PerBytes(u32),
    /// This many units when the read finds a value, none when the key is absent.
    OnHit(u32),
    /// GB-s: the operation's wall time, as the Worker timed it, at this many MB (1 GB =
    /// 1024 MB, as the provider's "128 MB = 0.125 GB" counts).
    DurationAtMb(u32),
}

/// A condition on the deployment that the answers do not show; the cost takes it from the
/// command line (`kvbench --redis-db`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum When {
    #[default]
    Always,
    /// `REDIS_URL` names a database other than 0, so every connection sends `SELECT`.
    RedisDbNonZero,
}

impl When {
    fn is_always(&self) -> bool {
        *self == When::Always
    }
}

/// One line of a bill: a unit in the provider's pricing and how many of it an operation costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Charge {
    pub unit: &'static str,
    pub count: Count,
    /// What the charge is for when the unit alone does not say (`"its expiry alarm"`).
    #[serde(skip_serializing_if = "is_empty")]
    pub why: &'static str,
    #[serde(skip_serializing_if = "When::is_always")]
    pub when: When,
}

fn is_empty(text: &&str) -> bool {
    text.is_empty()
}

const fn each(unit: &'static str) -> Charge {
    Charge {
        unit,
        count: Count::Each(1),
        why: "",
        when: When::Always,
    }
}

const fn each_for(unit: &'static str, why: &'static str) -> Charge {
    Charge {
        unit,
        count: Count::Each(1),
        why,
        when: When::Always,
    }
}

const fn counted_for(unit: &'static str, count: Count, why: &'static str) -> Charge {
    Charge {
        unit,
        count,
        why,
        when: When::Always,
    }
}

const fn counted(unit: &'static str, count: Count) -> Charge {
    Charge {
        unit,
        count,
        why: "",
        when: When::Always,
    }
}

/// How a store's read brings a value over the wire, for bandwidth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Wire {
    /// The value's bytes as they are.
    Raw,
    /// Base64 (Upstash REST with `Upstash-Encoding: base64`): `4 * ceil(n / 3)` bytes.
    Base64,
}

impl Wire {
    /// Bytes that travel for a value of `n` bytes.
    pub fn bytes(self, n: u64) -> u64 {
        match self {
            Wire::Raw => n,
            Wire::Base64 => n.div_ceil(3) * 4,
        }
    }
}

/// What the measured operations cost in the provider's billing units (prices live in kvbench's
/// dated `prices.toml`; these are the quantities it multiplies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Billing {
    /// One read (`get`), hit or miss.
    pub read: &'static [Charge],
    /// One successful write on a miss, with what the write causes later (an expiry alarm).
    pub write: &'static [Charge],
    /// Once per request whose store setup (`connect_ms`) succeeded, on top of its operations;
    /// a store that was not configured or could not connect ran none.
    pub per_connection: &'static [Charge],
    /// How a read's value travels (what bandwidth counts); writes send the value as it is.
    pub read_wire: Wire,
    /// What else the provider bills that these operations do not show.
    pub note: &'static str,
}

/// What a binding or variable is in wrangler.toml terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BindingKind {
    KvNamespace,
    DurableObjectNamespace,
    D1Database,
    R2Bucket,
    /// A `[[hyperdrive]]` binding.
    Hyperdrive,
    /// A `[vars]` entry or a secret.
    VarOrSecret,
    Secret,
}

/// A name the worker reads from its environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Binding {
    pub name: &'static str,
    pub kind: BindingKind,
}

/// Everything the benchmark knows about one store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StoreSpec {
    pub id: StoreId,
    pub name: &'static str,
    /// Prepended to the benchmark key in this store (`""`: the bare key).
    pub key_namespace: &'static str,
    /// The store's own limit on a key (namespace included), measured as `key_encoding` says;
    /// `None`: nothing below the benchmark's own
    /// (`kvbench_core::measurement::parameter::KEY_MAX_BYTES`).
    pub key_max_bytes: Option<u32>,
    pub key_encoding: KeyEncoding,
    /// The store's limit on one value; `None`: nothing below the benchmark's own
    /// (`kvbench_core::measurement::parameter::BYTES_MAX`).
    pub value_max_bytes: Option<u64>,
    /// The shortest TTL the store accepts, seconds.
    pub ttl_min_s: u32,
    pub billing: Billing,
    /// Bindings, vars and secrets the store needs; all of them, or it is `not_configured`.
    pub bindings: &'static [Binding],
    /// What `read_ms` and `write_ms` include, in one line.
    pub timed: &'static str,
    /// Facts a user needs before reading its numbers.
    pub notes: &'static [&'static str],
}

impl StoreSpec {
    /// The key this store reads and writes for the benchmark key `key`.
    pub fn store_key(&self, key: &str) -> String {
        let mut out = String::with_capacity(self.key_namespace.len() + key.len());
        out.push_str(self.key_namespace);
        out.push_str(key);
        out
    }

    /// The length the store's key limit applies to, for the benchmark key `key`.
    pub fn key_len(&self, key: &str) -> usize {
        let bytes = self.key_namespace.len() + key.len();
        match self.key_encoding {
            KeyEncoding::Bytes => bytes,
            // The tuple `[key]`: a tag, the bytes with every NUL escaped, a terminator.
            KeyEncoding::DenoTuple => {
                let nuls = self.key_namespace.bytes().chain(key.bytes());
                2 + bytes + nuls.filter(|b| *b == 0).count()
            }
        }
    }

    /// The longest benchmark key this store takes, if it limits keys.
    pub fn key_max(&self) -> Option<usize> {
        self.key_max_bytes.map(|max| max as usize)
    }
}

/// Names the worker reads from its environment, shared by the descriptions and the glue.
pub mod env {
    pub const BENCH_KV: &str = "BENCH_KV";
    pub const UPSTASH_REDIS_REST_URL: &str = "UPSTASH_REDIS_REST_URL";
    pub const UPSTASH_REDIS_REST_TOKEN: &str = "UPSTASH_REDIS_REST_TOKEN";
    pub const DENO_KV_URL: &str = "DENO_KV_URL";
    pub const DENO_KV_ACCESS_TOKEN: &str = "DENO_KV_ACCESS_TOKEN";
    pub const BENCH_DO: &str = "BENCH_DO";
    pub const BENCH_D1: &str = "BENCH_D1";
    pub const BENCH_R2: &str = "BENCH_R2";
    pub const REDIS_URL: &str = "REDIS_URL";
    pub const POSTGRES_URL: &str = "POSTGRES_URL";
    pub const BENCH_HYPERDRIVE: &str = "BENCH_HYPERDRIVE";
    /// The probes' Durable Object namespace (`ProbeObject`, not a store).
    pub const PROBES: &str = "BENCH_PROBES";
    /// The run archive's Durable Object namespace (`RunArchive`: a run's shards, not a store).
    pub const RUNS: &str = "BENCH_RUNS";
    /// The fleet directory's Durable Object namespace (`FleetDirectory`, not a store).
    pub const DIRECTORY: &str = "BENCH_DIRECTORY";
}

const fn binding(name: &'static str, kind: BindingKind) -> Binding {
    Binding { name, kind }
}

/// The stores, in [`StoreId`] order.
pub static STORES: [StoreSpec; 10] = [
    StoreSpec {
        id: StoreId::Kv,
        name: "Cloudflare Workers KV",
        key_namespace: "",
        key_max_bytes: Some(512),
        key_encoding: KeyEncoding::Bytes,
        value_max_bytes: Some(25 << 20),
        ttl_min_s: 60,
        billing: Billing {
            read: &[each("KV read")],
            write: &[each("KV write")],
            per_connection: &[],
            read_wire: Wire::Raw,
            note: "storage per GB-month",
        },
        bindings: &[binding(env::BENCH_KV, BindingKind::KvNamespace)],
        timed: "the binding's get (this colo's KV cache, and on a cache miss the trip to KV's \
                storage) until the bytes are in hand; put with expirationTtl",
        notes: &["a key may be written at most once a second (a faster write is `rate_limited`)"],
    },
    StoreSpec {
        id: StoreId::Upstash,
        name: "Upstash Redis over REST",
        key_namespace: "",
        key_max_bytes: None,
        key_encoding: KeyEncoding::Bytes,
        value_max_bytes: None,
        ttl_min_s: 1,
        billing: Billing {
            read: &[each("command")],
            write: &[each("command")],
            per_connection: &[],
            read_wire: Wire::Base64,
            note: "bandwidth beyond the plan's included volume, per GB: values written, and \
                   values read as they travel (base64, 4 bytes per 3)",
        },
        bindings: &[
            binding(env::UPSTASH_REDIS_REST_URL, BindingKind::VarOrSecret),
            binding(env::UPSTASH_REDIS_REST_TOKEN, BindingKind::Secret),
        ],
        timed: "a fetch POST of [\"GET\", key] (DNS, TLS and connection reuse as the runtime \
                does them) until the JSON answer is read; SET with EX the same way",
        notes: &[],
    },
    StoreSpec {
        id: StoreId::DenoKv,
        name: "Deno KV over KV Connect",
        key_namespace: "",
        key_max_bytes: Some(DENO_KV_KEY_MAX_BYTES),
        key_encoding: KeyEncoding::DenoTuple,
        value_max_bytes: Some(DENO_KV_VALUE_MAX_BYTES),
        ttl_min_s: 1,
        billing: Billing {
            read: &[counted("read unit", Count::PerBytes(4096))],
            write: &[counted("write unit", Count::PerBytes(1024))],
            per_connection: &[],
            read_wire: Wire::Raw,
            note: "managed Deno KV's units; a self-hosted denokv bills nothing but its host",
        },
        bindings: &[
            binding(env::DENO_KV_URL, BindingKind::VarOrSecret),
            binding(env::DENO_KV_ACCESS_TOKEN, BindingKind::Secret),
        ],
        timed: "a snapshot_read (protobuf over fetch) with the cached data-path token until the \
                answer is read; atomic_write the same way; the metadata exchange is connect_ms",
        notes: &["Deno Deploy Classic, home of the managed Deno KV \
             (https://api.deno.com/databases/<id>/connect), shut down on 2026-07-20: measure a \
             self-hosted denokv (`denokv serve`, KV Connect over HTTP), or the new Deploy's KV \
             if its external KV Connect URL works for you \
             (https://api.deno.com/v2/databases/<id>/connect is documented inconsistently and \
             is unverified here)"],
    },
    StoreSpec {
        id: StoreId::Do,
        name: "Durable Object with SQLite storage",
        key_namespace: "kvbench:do:",
        key_max_bytes: None,
        key_encoding: KeyEncoding::Bytes,
        value_max_bytes: Some(2_000_000),
        ttl_min_s: 1,
        billing: Billing {
            read: &[
                each("Durable Object request"),
                counted("SQLite row read", Count::OnHit(1)),
                counted("GB-s", Count::DurationAtMb(128)),
            ],
            write: &[
                each("Durable Object request"),
                each("SQLite row written"),
                counted("GB-s", Count::DurationAtMb(128)),
                each_for("SQLite row written", "its setAlarm"),
                each_for("Durable Object request", "its expiry alarm"),
                each_for("SQLite row read", "the alarm's scan"),
                each_for("SQLite row written", "the alarm's delete"),
            ],
            per_connection: &[],
            read_wire: Wire::Raw,
            note: "duration is estimated from the calls' wall time as the Worker timed them (the \
                   hop to the object included; time an object stays in memory between calls \
                   not); the alarm lines are one expiry per write, as with do_scope=key (with \
                   do_scope=shared one alarm may serve several: an upper bound); an expired \
                   row still read is 1 row read on a miss; storage per GB-month",
        },
        bindings: &[binding(env::BENCH_DO, BindingKind::DurableObjectNamespace)],
        timed: "the Worker-to-object hop (stub.fetch, waking or placing the object), the \
                object's SQLite query and the value streamed back until it is in hand",
        notes: &[
            "do_scope=key (default): one object per key, created near where the key is first \
             used, as a per-entity design would; do_scope=shared: one object for every key, so \
             requests from every colo travel to it and its single thread serialises them; \
             do_scope=colo: one object per key and colo the request runs in, created there \
             (stores.do.near_colo names the colo; what each fleet member measures)",
            "do_location hints where a new object is placed (it never moves an existing one)",
            "the row (key, value BLOB, expires_at) is a WITHOUT ROWID table: 1 row written per \
             write (2 with a rowid and its primary-key index); an alarm deletes expired rows \
             and an object left empty deletes its storage",
        ],
    },
    StoreSpec {
        id: StoreId::D1,
        name: "Cloudflare D1",
        key_namespace: "kvbench:d1:",
        key_max_bytes: None,
        key_encoding: KeyEncoding::Bytes,
        value_max_bytes: Some(2_000_000),
        ttl_min_s: 1,
        billing: Billing {
            read: &[counted("row read", Count::OnHit(1))],
            // workerd's SQLite counters (docs/deploying.md, "D1's deletes"): the row and its
            // index entry, plus one expired row of another key deleted per write.
            write: &[
                counted_for(
                    "row written",
                    Count::Each(2),
                    "the row and its expires_at index entry",
                ),
                counted_for(
                    "row written",
                    Count::Each(1),
                    "an expired row of another key deleted: one a write in the steady state",
                ),
                counted_for(
                    "row read",
                    Count::Each(7),
                    "finding and deleting that expired row through the index",
                ),
            ],
            per_connection: &[],
            read_wire: Wire::Raw,
            note: "the write's lines are the steady state, measured with workerd's SQLite \
                   counters: each write deletes up to 16 expired rows of other keys, one a write \
                   on average once the keys cycle (none while nothing has expired yet, so a \
                   short run bills less); D1 may count a deleted row's index entry as one more \
                   row written; an expired row still read is 1 row read on a miss; storage per \
                   GB-month",
        },
        bindings: &[binding(env::BENCH_D1, BindingKind::D1Database)],
        timed: "one prepared statement through the binding to the database (its primary, or \
                a replica with d1_session) until the row is in hand; the write is one batch: the \
                upsert and the deletion of up to 16 expired rows of other keys",
        notes: &[
            "table kvbench from migrations/ (wrangler d1 migrations apply); an expired row is \
             a miss and is overwritten; each write also deletes up to 16 expired rows of other \
             keys, the oldest first, through an index on expires_at, in the same batch (one \
             round trip, timed with the write), so the table holds no more than the rows \
             written in the last TTL and 16",
            "values are bound as text (they are printable ASCII): D1 carries a BLOB parameter \
             or result as a JSON array of numbers",
            "d1_session=first-unconstrained|first-primary runs the read and the write in one \
             Sessions API session (first-unconstrained lets a read replica answer)",
        ],
    },
    StoreSpec {
        id: StoreId::R2,
        name: "Cloudflare R2",
        key_namespace: "kvbench:r2:",
        key_max_bytes: Some(1024),
        key_encoding: KeyEncoding::Bytes,
        value_max_bytes: None,
        ttl_min_s: 1,
        billing: Billing {
            read: &[each("Class B operation")],
            write: &[each("Class A operation")],
            per_connection: &[],
            read_wire: Wire::Raw,
            note: "storage per GB-month; no egress fee; apart from requests, the cron's sweep \
                   of expired objects: 1 to 10 lists (Class A) every 5 minutes, its deletes free",
        },
        bindings: &[binding(env::BENCH_R2, BindingKind::R2Bucket)],
        timed: "the bucket's get until the whole body is in hand (an expired object's body is \
                not read); put of the bytes with the expiry in custom metadata",
        notes: &[
            "R2 has no per-object TTL: the expiry is custom metadata (expires-at-ms), an expired \
             object is a miss and is overwritten; the Cron Trigger deletes expired objects \
             (10 pages of 1,000 listed every 5 minutes), and npm run deploy's lifecycle rule \
             deletes any object under kvbench:r2: a day after its upload",
        ],
    },
    StoreSpec {
        id: StoreId::Cache,
        name: "Cache API (caches.default)",
        key_namespace: "kvbench:cache:",
        key_max_bytes: None,
        key_encoding: KeyEncoding::Bytes,
        value_max_bytes: None,
        ttl_min_s: 1,
        billing: Billing {
            read: &[],
            write: &[],
            per_connection: &[],
            read_wire: Wire::Raw,
            note: "the Cache API is not billed per operation",
        },
        bindings: &[],
        timed: "caches.default.match in this colo's cache until the body is in hand; put of a \
                response with Cache-Control: max-age=<ttl>",
        notes: &[
            "the Cache API does nothing on *.workers.dev (only on a custom domain): there the \
             worker reports cache as not_configured",
            "entries live in one colo and may be evicted before max-age: a miss is not an error",
        ],
    },
    StoreSpec {
        id: StoreId::Redis,
        name: "Redis over TCP (RESP)",
        key_namespace: "kvbench:redis:",
        key_max_bytes: None,
        key_encoding: KeyEncoding::Bytes,
        value_max_bytes: None,
        ttl_min_s: 1,
        billing: Billing {
            read: &[each("command")],
            write: &[each("command")],
            per_connection: &[Charge {
                unit: "command",
                count: Count::Each(1),
                why: "SELECT",
                when: When::RedisDbNonZero,
            }],
            read_wire: Wire::Raw,
            note: "on Upstash, priced like REST commands; Upstash bills neither AUTH nor INFO, \
                   PING, QUIT or COMMAND; bandwidth as for REST (values read travel raw)",
        },
        bindings: &[binding(env::REDIS_URL, BindingKind::Secret)],
        timed: "one RESP command on a connection opened for this request, until the whole \
                reply is in hand; the TCP connect, TLS handshake, AUTH and SELECT are connect_ms",
        notes: &[
            "Workers cannot keep a socket across requests: every request connects again, and \
             connect_ms is that cost",
            "point REDIS_URL and UPSTASH_REDIS_REST_URL at one database to compare TCP with \
             REST: redis keys are namespaced, so the two never read each other's values",
        ],
    },
    StoreSpec {
        id: StoreId::Postgres,
        name: "PostgreSQL over TCP",
        key_namespace: "kvbench:postgres:",
        key_max_bytes: None,
        key_encoding: KeyEncoding::Bytes,
        value_max_bytes: None,
        ttl_min_s: 1,
        billing: Billing {
            read: &[each("query")],
            write: &[each("query")],
            per_connection: &[],
            read_wire: Wire::Raw,
            note: "your provider's: managed Postgres is billed by compute time and storage, not \
                   per query (prices.toml carries one dated example plan)",
        },
        bindings: &[binding(env::POSTGRES_URL, BindingKind::Secret)],
        timed: "one statement (Parse, Bind, Execute, Sync) on a connection opened for this \
                request, until ReadyForQuery; the TCP connect, TLS (SSLRequest), startup and \
                authentication are connect_ms",
        notes: &[
            "table kvbench_values from migrations/postgres (npm run deploy and the local stack \
             apply it): bytea values, reads never return an expired row, and each write \
             deletes up to 16 expired rows through the expiry index",
            "Workers cannot keep a socket across requests: every request connects and \
             authenticates again, and connect_ms is that cost",
        ],
    },
    StoreSpec {
        id: StoreId::Hyperdrive,
        name: "PostgreSQL through Hyperdrive",
        key_namespace: "kvbench:hyperdrive:",
        key_max_bytes: None,
        key_encoding: KeyEncoding::Bytes,
        value_max_bytes: None,
        ttl_min_s: 1,
        billing: Billing {
            read: &[each("Hyperdrive query")],
            write: &[each("Hyperdrive query")],
            per_connection: &[],
            read_wire: Wire::Raw,
            note: "Hyperdrive is included in the Workers paid plan (the free plan allows \
                   100,000 queries a day); the database behind it is billed as postgres",
        },
        bindings: &[binding(env::BENCH_HYPERDRIVE, BindingKind::Hyperdrive)],
        timed: "the postgres store's statement, sent to the Hyperdrive binding's address (a \
                pooled proxy near the worker); connecting to the proxy is connect_ms",
        notes: &[
            "the same database and table as postgres, keys of its own: the two never read \
             each other's values",
            "reads use clock_timestamp(), a volatile function, which Hyperdrive never caches: \
             the numbers are its pool, not its query cache",
            "locally (Miniflare) the binding is a direct connection to the local server: no \
             pool, no cache; only an account shows Hyperdrive's pooling",
        ],
    },
];

/// Every description as JSON (what `/` shows and a native tool can read).
pub fn catalog() -> serde_json::Value {
    serde_json::to_value(STORES).unwrap_or_default()
}

fn charge_text(c: &Charge) -> String {
    let mut text = match c.count {
        Count::Each(n) => format!("{n} {}", units(c.unit, n)),
        Count::PerBytes(n) => format!("1 {} per {} (min 1)", c.unit, bytes_text(u64::from(n))),
        Count::OnHit(n) => format!("{n} {} on a hit", units(c.unit, n)),
        Count::DurationAtMb(mb) => format!("{} at {mb} MB x the call's wall time", c.unit),
    };
    if !c.why.is_empty() {
        text.push_str(&format!(" ({})", c.why));
    }
    match c.when {
        When::Always => {}
        When::RedisDbNonZero => text.push_str(" when REDIS_URL names a database other than 0"),
    }
    text
}

/// `n` of a billing unit, in words: "7 rows read", "2 commands" (a unit's name is its price
/// table key, singular).
fn units(unit: &str, n: u32) -> String {
    if n == 1 {
        unit.to_string()
    } else if let Some(rest) = unit.strip_prefix("row ") {
        format!("rows {rest}")
    } else if let Some((head, rest)) = unit.split_once(" row ") {
        format!("{head} rows {rest}")
    } else {
        format!("{unit}s")
    }
}

fn charges_text(charges: &[Charge]) -> String {
    if charges.is_empty() {
        return "free".into();
    }
    charges
        .iter()
        .map(charge_text)
        .collect::<Vec<_>>()
        .join(" + ")
}

fn bytes_text(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1024 && b % 1024 == 0 => format!("{} KiB", b >> 10),
        b => {
            // Thousands separators, as the docs write numbers.
            let digits = b.to_string();
            let mut out = String::new();
            for (i, c) in digits.chars().enumerate() {
                if i > 0 && (digits.len() - i) % 3 == 0 {
                    out.push(',');
                }
                out.push(c);
            }
            format!("{out} B")
        }
    }
}

/// `docs/stores.md`'s store tables, rendered from [`STORES`] (`crates/core/tests/docs_stores.rs`
/// keeps the page equal to this).
pub fn docs_tables() -> String {
    let mut out = String::from(
        "| store | what | key namespace | key limit | value limit | min TTL | configured by |\n\
         | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for s in &STORES {
        let bindings = if s.bindings.is_empty() {
            "nothing (a custom domain)".to_string()
        } else {
            s.bindings
                .iter()
                .map(|b| format!("`{}`", b.name))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let key = match (s.key_max_bytes, s.key_encoding) {
            (None, _) => "—".to_string(),
            (Some(n), KeyEncoding::Bytes) => bytes_text(u64::from(n)),
            (Some(n), KeyEncoding::DenoTuple) => format!("{} encoded", bytes_text(u64::from(n))),
        };
        let namespace = if s.key_namespace.is_empty() {
            "none".to_string()
        } else {
            format!("`{}`", s.key_namespace)
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} s | {} |\n",
            s.id.as_str(),
            s.name,
            namespace,
            key,
            s.value_max_bytes.map_or("—".into(), bytes_text),
            s.ttl_min_s,
            bindings,
        ));
    }
    out.push_str(
        "\n| store | one read costs | one write costs | per connection | also billed | the time includes |\n\
         | --- | --- | --- | --- | --- | --- |\n",
    );
    for s in &STORES {
        let per_connection = if s.billing.per_connection.is_empty() {
            "—".to_string()
        } else {
            charges_text(s.billing.per_connection)
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} |\n",
            s.id.as_str(),
            charges_text(s.billing.read),
            charges_text(s.billing.write),
            per_connection,
            s.billing.note,
            s.timed,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_are_in_id_order_and_ids_round_trip() {
        for (i, id) in StoreId::ALL.into_iter().enumerate() {
            assert_eq!(STORES[i].id, id);
            assert_eq!(id.spec().id, id);
            assert_eq!(StoreId::parse(id.as_str()), Some(id));
        }
        assert_eq!(StoreId::parse("memcached"), None);
    }

    #[test]
    fn namespaces_are_reserved_and_distinct() {
        let mut seen = Vec::new();
        for s in &STORES {
            if s.key_namespace.is_empty() {
                continue;
            }
            assert!(s.key_namespace.starts_with(RESERVED_PREFIX), "{:?}", s.id);
            assert!(!seen.contains(&s.key_namespace));
            seen.push(s.key_namespace);
        }
        assert_eq!(StoreId::Redis.spec().store_key("7"), "kvbench:redis:7");
        assert_eq!(StoreId::Upstash.spec().store_key("7"), "7");
    }

    #[test]
    fn key_lengths_follow_each_store_encoding() {
        assert_eq!(StoreId::Kv.spec().key_len("abc"), 3);
        assert_eq!(StoreId::R2.spec().key_len("abc"), "kvbench:r2:abc".len());
        assert_eq!(StoreId::DenoKv.spec().key_len("abc"), 5);
        assert_eq!(StoreId::DenoKv.spec().key_len("a\0c"), 6);
    }

    #[test]
    fn the_catalog_is_json_with_every_store() {
        let v = catalog();
        let ids: Vec<&str> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap())
            .collect();
        assert_eq!(
            ids,
            [
                "kv",
                "upstash",
                "denokv",
                "do",
                "d1",
                "r2",
                "cache",
                "redis",
                "postgres",
                "hyperdrive"
            ]
        );
        assert_eq!(v[2]["billing"]["read"][0]["count"]["per_bytes"], 4096);
        assert_eq!(v[3]["billing"]["read"][1]["count"]["on_hit"], 1);
        assert_eq!(v[0]["bindings"][0]["kind"], "kv_namespace");
    }

    #[test]
    fn base64_travels_four_bytes_per_three() {
        for (n, wire) in [
            (0, 0),
            (1, 4),
            (3, 4),
            (4, 8),
            (3000, 4000),
            (1 << 20, 1_398_104),
        ] {
            assert_eq!(Wire::Base64.bytes(n), wire, "{n}");
            assert_eq!(Wire::Raw.bytes(n), n);
        }
        assert_eq!(StoreId::Upstash.spec().billing.read_wire, Wire::Base64);
        assert_eq!(StoreId::Redis.spec().billing.read_wire, Wire::Raw);
    }

    #[test]
    fn bytes_read_like_the_docs() {
        assert_eq!(bytes_text(25 << 20), "25 MiB");
        assert_eq!(bytes_text(65_536), "64 KiB");
        assert_eq!(bytes_text(2_000_000), "2,000,000 B");
        assert_eq!(bytes_text(512), "512 B");
    }
}
