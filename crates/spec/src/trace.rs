//! How long a probe's or member's trace of its colo may take: the core waits this long at most,
//! and the bill prices a trace at it.

/// How long a trace may take before its colo is "unknown": it runs before a member's answer
/// is sent (or a probe's measurement starts), so it is short.
pub const DEADLINE_MS: u64 = 2_000;
