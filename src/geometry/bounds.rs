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
    /// `lo` and `hi` are instants, in seconds since 1970-01-01T00:00:00Z, written as dates or timestamps
    /// (`ts=2024-01-01:2025-01-01T00:00:00Z`): [`ColumnBounds::in_unit_of`] turns them into the column's unit
    /// once its type is known. `false`: numbers in the column's own unit.
    pub instants: bool,
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
        Ok(ColumnBounds { column, lo, hi, instants: false })
    }

    /// Maps a point of [0,1] back to the column's units.
    #[inline(always)]
    pub fn denormalise(&self, unit: f64) -> f64 {
        self.lo + unit * (self.hi - self.lo)
    }
}

impl FromStr for ColumnBounds {
    type Err = Error;

    /// Parses `col=lo:hi`, for example `dep_delay=-120:1440`, or dates and timestamps for a date or
    /// timestamp column, `ts=2024-01-01:2025-01-01T00:00:00Z` (see [`parse_instant`]).
    fn from_str(text: &str) -> Result<Self> {
        let usage = || {
            Error::bad_input(format!(
                "--bounds '{text}': expected COLUMN=LO:HI, for example age=0:120 or day=2024-01-01:2025-01-01"
            ))
        };
        let (column, range) = text.rsplit_once('=').ok_or_else(usage)?;
        if column.trim().is_empty() {
            return Err(usage());
        }
        if let Some((lo, hi)) = instants_in(range) {
            let mut bounds = ColumnBounds::new(column.trim(), lo, hi)?;
            bounds.instants = true;
            return Ok(bounds);
        }
        let (lo, hi) = range.split_once(':').ok_or_else(usage)?;
        let number = |part: &str| {
            part.trim().parse::<f64>().map_err(|_| {
                Error::bad_input(format!(
                    "--bounds '{text}': '{part}' is not a number (nor a date such as 2024-01-01 or a timestamp \
                     such as 2024-01-01T00:00:00Z)"
                ))
            })
        };
        ColumnBounds::new(column.trim(), number(lo)?, number(hi)?)
    }
}

/// `lo:hi` as two dates or timestamps, split at the one colon where both sides read as such (a timestamp's
/// own colons make a plain split ambiguous).
fn instants_in(range: &str) -> Option<(f64, f64)> {
    range.match_indices(':').find_map(|(at, _)| Some((parse_instant(&range[..at])?, parse_instant(&range[at + 1..])?)))
}

/// A date (`2024-01-01`, midnight UTC) or a timestamp (RFC 3339: `2024-01-01T06:30:00Z`,
/// `2024-01-01T06:30:00+02:00`; without an offset, UTC; a space may replace the T) in seconds since
/// 1970-01-01T00:00:00Z.
pub fn parse_instant(text: &str) -> Option<f64> {
    use chrono::{DateTime, NaiveDate, NaiveDateTime};
    let text = text.trim();
    let seconds = |naive: NaiveDateTime| {
        let utc = naive.and_utc();
        utc.timestamp() as f64 + f64::from(utc.timestamp_subsec_nanos()) * 1e-9
    };
    if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Some(seconds(date.and_hms_opt(0, 0, 0)?));
    }
    if let Ok(instant) = DateTime::parse_from_rfc3339(text) {
        return Some(seconds(instant.naive_utc()));
    }
    ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M"]
        .iter()
        .find_map(|format| NaiveDateTime::parse_from_str(text, format).ok())
        .map(seconds)
}

impl ColumnBounds {
    /// The bounds in the unit of a column of `data_type`: as they are when given as numbers; dates and
    /// timestamps converted into a date column's days (or milliseconds) or a timestamp column's unit (its
    /// time zone does not change the instant). `Err` says why a type cannot take them.
    pub fn in_unit_of(&self, data_type: &arrow::datatypes::DataType) -> std::result::Result<ColumnBounds, String> {
        use arrow::datatypes::{DataType, TimeUnit};
        if !self.instants {
            return Ok(self.clone());
        }
        let per_second = match data_type {
            DataType::Date32 => 1.0 / 86_400.0,
            DataType::Date64 | DataType::Timestamp(TimeUnit::Millisecond, _) => 1e3,
            DataType::Timestamp(TimeUnit::Second, _) => 1.0,
            DataType::Timestamp(TimeUnit::Microsecond, _) => 1e6,
            DataType::Timestamp(TimeUnit::Nanosecond, _) => 1e9,
            other => return Err(format!("bounds given as dates need a date or timestamp column, the type is {other}")),
        };
        Ok(ColumnBounds { lo: self.lo * per_second, hi: self.hi * per_second, instants: false, ..self.clone() })
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
            ColumnBounds { column: "dep_delay".into(), lo: -120.0, hi: 1440.0, instants: false }
        );
        assert_eq!(bounds.denormalise(0.5), 660.0);
    }

    #[test]
    fn dates_and_timestamps_parse_into_the_columns_unit() {
        use arrow::datatypes::{DataType, TimeUnit};
        let day: ColumnBounds = "day=2024-01-01:2025-01-01".parse().unwrap();
        assert!(day.instants);
        let days = day.in_unit_of(&DataType::Date32).unwrap();
        assert_eq!((days.lo, days.hi), (19_723.0, 20_089.0));
        let ts: ColumnBounds = "ts=2024-01-01:2025-01-01T00:00:00Z".parse().unwrap();
        let zoned = DataType::Timestamp(TimeUnit::Millisecond, Some("Europe/Paris".into()));
        assert_eq!(ts.in_unit_of(&zoned).unwrap().hi, 1_735_689_600_000.0);
        let offset: ColumnBounds = "ts=2024-01-01T02:00:00+02:00:2024-01-02 00:00:00".parse().unwrap();
        assert_eq!((offset.lo, offset.hi), (1_704_067_200.0, 1_704_153_600.0));
        assert!(day.in_unit_of(&DataType::Int64).is_err());
        // Numbers stay in the column's own unit, as before.
        let raw: ColumnBounds = "day=19723:20089".parse().unwrap();
        assert_eq!(raw.in_unit_of(&DataType::Date32).unwrap(), raw);
        assert!("day=2025-01-01:2024-01-01".parse::<ColumnBounds>().is_err());
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
