//! The keep policy: how long a probe's (or run shard's) answer is kept and when it is deleted,
//! the rule the probes, the run archive and the bill all follow.

/// Var: seconds an answer is kept before it is deleted.
pub const KEEP_VAR: &str = "PROBE_KEEP";
/// A week.
pub const DEFAULT_KEEP_S: u32 = 7 * 86_400;
pub const MIN_KEEP_S: u32 = 60;
pub const MAX_KEEP_S: u32 = 90 * 86_400;
/// An answer is deleted this long after it expired (`keep`): a read of the keep window that
/// takes less never has a row deleted under it.
pub const EXPIRY_GRACE_S: u32 = 3600;

/// Milliseconds after its `t_ms` an answer kept for `keep_s` is deleted.
pub fn expiry_after_ms(keep_s: u32) -> f64 {
    (f64::from(keep_s.max(MIN_KEEP_S)) + f64::from(EXPIRY_GRACE_S)) * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_deleted_its_keep_and_the_grace_after_never_sooner_than_the_least_keep() {
        assert_eq!(expiry_after_ms(7200), (7200.0 + 3600.0) * 1000.0);
        // A keep below the least is held to it (a stored 0 is no "delete at once").
        assert_eq!(expiry_after_ms(0), (60.0 + 3600.0) * 1000.0);
        assert_eq!(expiry_after_ms(59), expiry_after_ms(MIN_KEEP_S));
    }
}
