//! Binning: from decoded columns to the leaf histogram of the partition (docs/design.md).
//!
//! The host quantises every value to its per-axis cell index (f64 arithmetic, once, in
//! [`quantize_values`]); a [`Binner`] then interleaves the indices into Morton codes and counts them.
//! Because every binner starts from the same integers, CPU and GPU histograms are identical by
//! construction.

pub mod cpu;
pub mod device;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod grid;
pub mod histogram;
pub mod pass;
mod scan;
pub mod value_grid;

use arrow::buffer::NullBuffer;
use serde::{Deserialize, Serialize};

pub use scan::{scan_leaf_counts, scan_quantised_rows, ScanStats};
// The axes the binner quantises along; they belong to the geometry (the sampler and the cell codes read them).
pub use crate::geometry::axis::AxisPlan;

use crate::error::Result;
use crate::io::source::column::{AsF64, NumericValues};

/// A row flag: some coordinate was outside its bounds and was clamped.
pub const ROW_CLAMPED: u8 = 1;
/// A row flag: some coordinate was null, NaN or infinite.
pub const ROW_INVALID: u8 = 2;

/// What to do with rows that have a null, NaN or infinite value in a used column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum NullPolicy {
    /// Null is a value of every nullable column's domain: its share is released like any other cell's, so
    /// the synthetic null rate follows the real one (a NaN or infinite value is still an error).
    Keep,
    /// Stop with an error naming the column and row group.
    Error,
    /// Leave such rows out (their count goes to the diagnostics only).
    Drop,
}

impl NullPolicy {
    /// Of the commands that read numbers only (eval, stream); synth keeps nulls where its mechanism can.
    pub const DEFAULT: NullPolicy = NullPolicy::Error;
}

/// Counts leaf codes. One [`BinnerWorker`] per scanning thread feeds batches; `finish` merges them.
pub trait Binner: Sync {
    type Worker: BinnerWorker;
    fn worker(&self) -> Result<Self::Worker>;
    /// The leaf histogram (length 2^r) of everything the workers were fed.
    fn finish(&self, workers: Vec<Self::Worker>) -> Result<Vec<u64>>;
}

pub trait BinnerWorker: Send {
    /// One batch of quantised rows: `axes[k][i]` is row i's cell index on axis k, below 2^{h_k(r)}.
    fn add_batch(&mut self, axes: &[&[u32]]) -> Result<()>;
}


/// Quantises one column into `indices`, OR-ing [`ROW_CLAMPED`] / [`ROW_INVALID`] into `flags`.
/// Returns how many values were clamped.
pub fn quantize_values(
    values: &NumericValues,
    nulls: Option<&NullBuffer>,
    axis: &AxisPlan,
    indices: &mut [u32],
    flags: &mut [u8],
) -> u64 {
    macro_rules! each {
        ($values:expr) => {
            quantize_slice($values, axis, indices, flags)
        };
    }
    let clamped = match values {
        NumericValues::F32(values) => each!(values),
        NumericValues::F64(values) => each!(values),
        NumericValues::I8(values) => each!(values),
        NumericValues::I16(values) => each!(values),
        NumericValues::I32(values) => each!(values),
        NumericValues::I64(values) => each!(values),
        NumericValues::U8(values) => each!(values),
        NumericValues::U16(values) => each!(values),
        NumericValues::U32(values) => each!(values),
        NumericValues::U64(values) => each!(values),
    };
    if let Some(nulls) = nulls {
        for row in nulls
            .iter()
            .enumerate()
            .filter_map(|(row, valid)| (!valid).then_some(row))
        {
            flags[row] |= ROW_INVALID;
        }
    }
    clamped
}

fn quantize_slice<T: AsF64>(
    values: &[T],
    axis: &AxisPlan,
    indices: &mut [u32],
    flags: &mut [u8],
) -> u64 {
    match axis.warp() {
        None => quantize_slice_with(values, axis, indices, flags, |value| axis.quantize_box(value)),
        Some(cdf) => quantize_slice_with(values, axis, indices, flags, |value| {
            axis.quantize_warped(cdf, value)
        }),
    }
}

/// The loop of [`quantize_slice`] for one kind of axis (chosen outside the loop).
#[inline(always)]
fn quantize_slice_with<T: AsF64>(
    values: &[T],
    axis: &AxisPlan,
    indices: &mut [u32],
    flags: &mut [u8],
    quantize: impl Fn(f64) -> u32,
) -> u64 {
    let (lo, hi) = (axis.bounds.lo, axis.bounds.hi);
    let mut clamped = 0u64;
    // Branch-free so that it vectorises.
    for ((&value, index), flag) in values.iter().zip(indices.iter_mut()).zip(flags.iter_mut()) {
        let value = value.as_f64();
        let outside = (value < lo) | (value > hi);
        clamped += outside as u64;
        *flag |= (outside as u8 * ROW_CLAMPED) | (!value.is_finite() as u8 * ROW_INVALID);
        *index = quantize(value);
    }
    clamped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::bounds::ColumnBounds;
    use crate::geometry::cdf::CellCdf;
    use std::sync::Arc;

    #[test]
    fn quantisation_flags_clamped_and_invalid_values() {
        let axis = AxisPlan::new(ColumnBounds::new("x", -1.0, 1.0).unwrap(), 3);
        let values = [-1.0, -2.0, 0.0, 0.999, 1.0, 7.0, f64::NAN, f64::INFINITY];
        let mut indices = [0u32; 8];
        let mut flags = [0u8; 8];
        let clamped = quantize_values(
            &NumericValues::F64(&values),
            None,
            &axis,
            &mut indices,
            &mut flags,
        );
        assert_eq!(indices[..6], [0, 0, 4, 7, 7, 7]);
        assert_eq!(clamped, 3, "-2, 7 and +inf are outside [-1, 1]");
        assert_eq!(flags[..6], [0, ROW_CLAMPED, 0, 0, 0, ROW_CLAMPED]);
        assert_eq!(flags[6], ROW_INVALID);
        assert_eq!(flags[7], ROW_INVALID | ROW_CLAMPED);
    }

    #[test]
    fn a_warped_axis_cuts_at_the_quantiles_of_its_marginal() {
        // Half the mass in the first eighth of [0, 8], the rest spread over the other seven eighths.
        let cdf = Arc::new(CellCdf::from_counts(&[7, 1, 1, 1, 1, 1, 1, 1]).unwrap());
        let axis = AxisPlan::warped(ColumnBounds::new("x", 0.0, 8.0).unwrap(), 1, cdf.clone());
        // Two cells: the median 1.0 separates them.
        assert_eq!(axis.quantize(0.99), 0);
        assert_eq!(axis.quantize(1.0), 1);
        assert_eq!(axis.quantize(8.0), 1);
        let fine = AxisPlan::warped(ColumnBounds::new("x", 0.0, 8.0).unwrap(), 4, cdf.clone());
        let values: Vec<f64> = (-10..=90).map(|k| f64::from(k) / 10.0).collect();
        let mut indices = vec![0u32; values.len()];
        let mut flags = vec![0u8; values.len()];
        quantize_values(&NumericValues::F64(&values), None, &fine, &mut indices, &mut flags);
        for ((&value, &index), window) in values.iter().zip(&indices).zip(indices.windows(2)) {
            assert!(window[0] <= window[1], "monotone");
            let expected = (cdf.value(value / 8.0) * 16.0).floor().min(15.0) as u32;
            assert_eq!(index, expected, "{value}");
            assert_eq!(fine.quantize(value), index, "one quantisation for slices and single values");
        }
        assert_eq!(flags[0], ROW_CLAMPED, "-1 is outside [0, 8]");
    }
}
