//! The KV Connect data-path messages of `snapshot_read` and `atomic_write`, as `prost` derives
//! written from `com.deno.kv.datapath` (`denokv_proto` 0.14.0, MIT): vendored, since
//! `denokv_proto`'s dependencies would weigh on the wasm and `prost-build` needs `protoc`.

/// `SnapshotRead`: the ranges to read.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct SnapshotRead {
    #[prost(message, repeated, tag = "1")]
    pub ranges: Vec<ReadRange>,
}

/// `SnapshotReadOutput` (fields 3, 5, 6, 7 are reserved in the schema).
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct SnapshotReadOutput {
    #[prost(message, repeated, tag = "1")]
    pub ranges: Vec<ReadRangeOutput>,
    #[prost(bool, tag = "2")]
    pub read_disabled: bool,
    #[prost(bool, tag = "4")]
    pub read_is_strongly_consistent: bool,
    #[prost(enumeration = "SnapshotReadStatus", tag = "8")]
    pub status: i32,
}

/// `ReadRange`: keys in `[start, end)`, at most `limit` of them.
#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct ReadRange {
    #[prost(bytes = "vec", tag = "1")]
    pub start: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub end: Vec<u8>,
    #[prost(int32, tag = "3")]
    pub limit: i32,
    #[prost(bool, tag = "4")]
    pub reverse: bool,
}

#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ReadRangeOutput {
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<KvEntry>,
}

/// `AtomicWrite`: checks, mutations and enqueues applied all or nothing.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct AtomicWrite {
    #[prost(message, repeated, tag = "1")]
    pub checks: Vec<Check>,
    #[prost(message, repeated, tag = "2")]
    pub mutations: Vec<Mutation>,
    #[prost(message, repeated, tag = "3")]
    pub enqueues: Vec<Enqueue>,
}

/// `AtomicWriteOutput` (field 3 is reserved in the schema).
#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct AtomicWriteOutput {
    #[prost(enumeration = "AtomicWriteStatus", tag = "1")]
    pub status: i32,
    #[prost(bytes = "vec", tag = "2")]
    pub versionstamp: Vec<u8>,
    #[prost(uint32, repeated, tag = "4")]
    pub failed_checks: Vec<u32>,
}

#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct Check {
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub versionstamp: Vec<u8>,
}

/// `Mutation`: `expire_at_ms` is milliseconds since the Unix epoch; 0 never expires.
#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct Mutation {
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    #[prost(message, optional, tag = "2")]
    pub value: Option<KvValue>,
    #[prost(enumeration = "MutationType", tag = "3")]
    pub mutation_type: i32,
    #[prost(int64, tag = "4")]
    pub expire_at_ms: i64,
    #[prost(bytes = "vec", tag = "5")]
    pub sum_min: Vec<u8>,
    #[prost(bytes = "vec", tag = "6")]
    pub sum_max: Vec<u8>,
    #[prost(bool, tag = "7")]
    pub sum_clamp: bool,
}

#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct KvValue {
    #[prost(bytes = "vec", tag = "1")]
    pub data: Vec<u8>,
    #[prost(enumeration = "ValueEncoding", tag = "2")]
    pub encoding: i32,
}

#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct KvEntry {
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
    #[prost(enumeration = "ValueEncoding", tag = "3")]
    pub encoding: i32,
    #[prost(bytes = "vec", tag = "4")]
    pub versionstamp: Vec<u8>,
}

/// Never sent by this client; declared so `AtomicWrite` mirrors the schema.
#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct Enqueue {
    #[prost(bytes = "vec", tag = "1")]
    pub payload: Vec<u8>,
    #[prost(int64, tag = "2")]
    pub deadline_ms: i64,
    #[prost(bytes = "vec", repeated, tag = "3")]
    pub keys_if_undelivered: Vec<Vec<u8>>,
    #[prost(uint32, repeated, tag = "4")]
    pub backoff_schedule: Vec<u32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum SnapshotReadStatus {
    SrUnspecified = 0,
    SrSuccess = 1,
    SrReadDisabled = 2,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum MutationType {
    MUnspecified = 0,
    MSet = 1,
    MDelete = 2,
    MSum = 3,
    MMax = 4,
    MMin = 5,
    MSetSuffixVersionstampedKey = 9,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum ValueEncoding {
    VeUnspecified = 0,
    /// V8 `ValueSerializer` (what Deno uses for strings, numbers, objects).
    VeV8 = 1,
    VeLe64 = 2,
    /// Raw bytes: a `Uint8Array` to Deno clients.
    VeBytes = 3,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum AtomicWriteStatus {
    AwUnspecified = 0,
    AwSuccess = 1,
    AwCheckFailure = 2,
    AwWriteDisabled = 5,
}
