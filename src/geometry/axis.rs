//! One column on one axis of a partition: its public bounds cut into equal cells, or into the cells of a
//! released marginal's quantiles. The only quantisation step of the engine (values to per-axis cell
//! indices); the binner, the sampler's integer cells and the cell codes all read it.

use std::sync::Arc;

use super::bounds::ColumnBounds;
use super::cdf::CellCdf;
use super::partition::CellGeometry;

/// How one column maps onto one axis of the partition.
#[derive(Clone, Debug)]
pub struct AxisPlan {
    pub bounds: ColumnBounds,
    /// Cells on this axis / (hi − lo): one multiplication maps a value to its fractional cell index.
    scale: f64,
    /// The top cell (where hi itself and everything clamped above it goes).
    top: f64,
    /// The quantile partition's axis: a value goes through this released marginal's CDF (on the
    /// normalised axis) before the cells, which then cut the axis at the marginal's quantiles. `None`
    /// cuts the public box into equal cells.
    warp: Option<Arc<CellCdf>>,
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
            warp: None,
        }
    }

    /// The axis halved `bits` times after the map x ↦ `cdf`((x − lo)/(hi − lo)): its 2^bits cells hold
    /// equal shares of the marginal `cdf` describes.
    pub fn warped(bounds: ColumnBounds, bits: u32, cdf: Arc<CellCdf>) -> Self {
        AxisPlan {
            warp: Some(cdf),
            ..Self::new(bounds, bits)
        }
    }

    /// The quantile partition's warp, when the axis has one.
    pub(crate) fn warp(&self) -> Option<&Arc<CellCdf>> {
        self.warp.as_ref()
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
        match &self.warp {
            None => self.quantize_box(value),
            Some(cdf) => self.quantize_warped(cdf, value),
        }
    }

    /// The equal cells of the public box.
    #[inline(always)]
    pub(crate) fn quantize_box(&self, value: f64) -> u32 {
        let index = ((value - self.bounds.lo) * self.scale)
            .max(0.0)
            .min(self.top);
        // SAFETY: `index` is finite (max() drops NaN) and in [0, 2^31 − 1], so it fits an i32.
        unsafe { index.to_int_unchecked::<i32>() as u32 }
    }

    /// ⌊F(t)·cells⌋ clamped, t the value on the normalised axis, F the warp.
    #[inline(always)]
    pub(crate) fn quantize_warped(&self, cdf: &CellCdf, value: f64) -> u32 {
        let cells = self.top + 1.0;
        // t as the box's equal cells compute it, scaled by a power of two: on both, a value on an edge of
        // F's cells is on it to the bit.
        let unit = (value - self.bounds.lo) * self.scale * (1.0 / cells);
        let (warped, cell_end) = cdf.value_in_cell(unit);
        // A value below the end of F's cell is below F there: where that is an edge of this axis (an
        // aligned warp's), rounding in F must not carry the value over it: the index is at most ⌈end⌉ − 1.
        let end = cell_end * cells;
        let whole = end as u32 as f64;
        let last = if whole == end { end - 1.0 } else { whole };
        let index = (warped * cells).min(last).max(0.0).min(self.top);
        // SAFETY: as in quantize_box (F maps every number, NaN aside, into [0, 1]).
        unsafe { index.to_int_unchecked::<i32>() as u32 }
    }
}
