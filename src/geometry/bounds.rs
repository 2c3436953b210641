//! Public bounds: the box [lo, hi] per column that maps the data to [0,1]^d (docs/privacy.md).
//!
//! Bounds are public input, given by the user (`--bounds col=lo:hi` or the config file). They are never
//! computed from the data: a data min/max is itself a private statistic.

use std::fmt;
use std::str::FromStr;

use crate::error::{compact_number, Error, Result};

#[derive(Clone, Debug, PartialEq)]
pub struct ColumnBounds {
    pub column: String,
    pub lo: f64,
    pub hi: f64,
}

impl ColumnBounds {
    pub fn new(column: impl Into<String>, lo: f64, hi: f64) -> Result<Self> {
        let column = column.into();
        if !lo.is_finite() || !hi.is_finite() {
            return Err(Error::bad_input(format!(
                "bounds for column '{column}': {}:{} must be finite numbers",
                compact_number(lo),
                compact_number(hi)
            )));
        }
        if lo >= hi {
            return Err(Error::bad_input(format!(
                "bounds for column '{column}': lo {} must be below hi {}",
                compact_number(lo),
                compact_number(hi)
            )));
        }
        if !(hi - lo).is_finite() {
            return Err(Error::bad_input(format!(
                "bounds for column '{column}': the width {} − ({}) overflows a 64-bit float; \
                 give a narrower range",
                compact_number(hi),
                compact_number(lo)
            )));
        }
        Ok(ColumnBounds { column, lo, hi })
    }

    /// Maps a point of [0,1] back to the column's units.
    #[inline(always)]
    pub fn denormalise(&self, unit: f64) -> f64 {
        self.lo + unit * (self.hi - self.lo)
    }
}

impl FromStr for ColumnBounds {
    type Err = Error;

    /// Parses `col=lo:hi`, for example `dep_delay=-120:1440`.
    fn from_str(text: &str) -> Result<Self> {
        let usage = || {
            Error::bad_input(format!(
                "--bounds '{text}': expected COLUMN=LO:HI, for example age=0:120"
            ))
        };
        let (column, range) = text.rsplit_once('=').ok_or_else(usage)?;
        let (lo, hi) = range.split_once(':').ok_or_else(usage)?;
        let number = |part: &str| {
            part.trim().parse::<f64>().map_err(|_| {
                Error::bad_input(format!("--bounds '{text}': '{part}' is not a number"))
            })
        };
        if column.trim().is_empty() {
            return Err(usage());
        }
        ColumnBounds::new(column.trim(), number(lo)?, number(hi)?)
    }
}

impl fmt::Display for ColumnBounds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}:{}", self.column, self.lo, self.hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_negative_and_scientific_bounds() {
        let bounds: ColumnBounds = "dep_delay=-120:1.44e3".parse().unwrap();
        assert_eq!(
            bounds,
            ColumnBounds {
                column: "dep_delay".into(),
                lo: -120.0,
                hi: 1440.0
            }
        );
        assert_eq!(bounds.denormalise(0.5), 660.0);
    }

    #[test]
    fn rejects_malformed_or_empty_ranges() {
        for text in [
            "x", "x=1", "=0:1", "x=a:1", "x=1:1", "x=2:1", "x=0:inf", "x=nan:1", "x=-1e308:1e308",
        ] {
            let error = text.parse::<ColumnBounds>().unwrap_err();
            assert!(matches!(error, Error::BadInput(_)), "{text}");
        }
    }
}
