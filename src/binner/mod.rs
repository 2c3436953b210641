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
mod histogram;
pub mod pass;
mod scan;

use arrow::buffer::NullBuffer;
use serde::{Deserialize, Serialize};

pub use scan::{scan_leaf_counts, scan_quantised_rows, ScanStats};

use crate::geometry::bounds::ColumnBounds;
use crate::error::Result;
use crate::geometry::partition::CellGeometry;
use crate::io::source::column::{AsF64, NumericValues};

/// A row flag: some coordinate was outside its bounds and was clamped.
pub const ROW_CLAMPED: u8 = 1;
/// A row flag: some coordinate was null, NaN or infinite.
pub const ROW_INVALID: u8 = 2;

/// What to do with rows that have a null, NaN or infinite value in a used column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum NullPolicy {
    /// Stop with an error naming the column and row group.
    Error,
    /// Leave such rows out (their count goes to the diagnostics only).
    Drop,
}

impl NullPolicy {
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

/// How one column maps onto one axis of the partition.
#[derive(Clone, Debug)]
pub struct AxisPlan {
    pub bounds: ColumnBounds,
    /// Cells on this axis / (hi − lo): one multiplication maps a value to its fractional cell index.
    scale: f64,
    /// The top cell (where hi itself and everything clamped above it goes).
    top: f64,
}

impl AxisPlan {
    /// The axis of the dyadic partition halved `bits` times (2^bits cells).
    pub fn new(bounds: ColumnBounds, bits: u32) -> Self {
        Self::with_cells(bounds, 1 << bits)
    }

    /// An axis cut into `cells` equal cells (a regular grid's axis), `cells` in 1..=2^31.
    pub fn with_cells(bounds: ColumnBounds, cells: u32) -> Self {
        assert!((1..=1 << 31).contains(&cells), "{cells} cells on one axis");
        let cells = f64::from(cells);
        let scale = cells / (bounds.hi - bounds.lo);
        AxisPlan {
            bounds,
            scale,
            top: cells - 1.0,
        }
    }

    pub fn for_geometry(geometry: &CellGeometry, bounds: &[ColumnBounds]) -> Vec<AxisPlan> {
        bounds
            .iter()
            .enumerate()
            .map(|(axis, bounds)| AxisPlan::new(bounds.clone(), geometry.axis_bits(axis)))
            .collect()
    }

    /// The cell index of a value on this axis: ⌊(x − lo)·cells/(hi − lo)⌋ clamped to [0, cells − 1]
    /// (NaN goes to 0; the caller flags it). This is the only quantisation step of the engine, done on
    /// the host in f64 for every binner, so CPU and GPU histograms are identical by construction.
    #[inline(always)]
    pub fn quantize(&self, value: f64) -> u32 {
        let index = ((value - self.bounds.lo) * self.scale)
            .max(0.0)
            .min(self.top);
        // SAFETY: `index` is finite (max() drops NaN) and in [0, 2^31 − 1], so it fits an i32.
        unsafe { index.to_int_unchecked::<i32>() as u32 }
    }
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
    let (lo, hi) = (axis.bounds.lo, axis.bounds.hi);
    let mut clamped = 0u64;
    // Branch-free so that it vectorises.
    for ((&value, index), flag) in values.iter().zip(indices.iter_mut()).zip(flags.iter_mut()) {
        let value = value.as_f64();
        let outside = (value < lo) | (value > hi);
        clamped += outside as u64;
        *flag |= (outside as u8 * ROW_CLAMPED) | (!value.is_finite() as u8 * ROW_INVALID);
        *index = axis.quantize(value);
    }
    clamped
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
