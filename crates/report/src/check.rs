//! Checked adds: counts added across reports ([`plus`], [`plus_hist`]) refuse to pass
//! [`MAX_COUNT`], so a sum of files from anyone is an error naming the field, never a wrapped
//! count (the file itself is checked when read: [`crate::file`]).

use crate::hist::{Hist, MAX_COUNT};

/// A count that cannot be added: where (its path in report.json), and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{at}: {why}")]
pub struct AddError {
    pub at: String,
    pub why: String,
}

impl AddError {
    /// The same error, one level further down from `parent`.
    pub fn under(self, parent: &str) -> AddError {
        AddError {
            at: format!("{parent}.{}", self.at),
            why: self.why,
        }
    }
}

/// `*into += n`, refused past [`MAX_COUNT`].
pub fn plus(into: &mut u64, n: u64, field: &str) -> Result<(), AddError> {
    match into.checked_add(n).filter(|sum| *sum <= MAX_COUNT) {
        Some(sum) => {
            *into = sum;
            Ok(())
        }
        None => Err(AddError {
            at: field.into(),
            why: format!("{into} + {n} is more than {MAX_COUNT} (2^53), the most kvbench counts"),
        }),
    }
}

/// Histogram addition, refused past [`MAX_COUNT`] samples ([`Hist::try_add`]).
pub fn plus_hist(into: &mut Hist, h: &Hist, field: &str) -> Result<(), AddError> {
    into.try_add(h).map_err(|e| AddError {
        at: field.into(),
        why: e.to_string(),
    })
}
