//! The data access of a release: one pass over the input's used columns, quantised with their public
//! bounds, under the run's null policy and on the run's binning device. Mechanisms see the private data
//! only through a [`DataPass`], and only as histograms, per-thread folds of quantised rows, or (covloss,
//! microagg) the bit planes of a public encoding.

use std::sync::Arc;

use super::device::{ChosenBinner, DeviceChoice};
use super::grid::GridBinner;
use super::{scan_leaf_counts, scan_quantised_rows, AxisPlan, BinnerWorker, NullPolicy, ScanStats};
use crate::encoding::read::{read_bits, BitRows};
use crate::encoding::Encoding;
use crate::error::Result;
use crate::geometry::bounds::ColumnBounds;
use crate::geometry::cdf::CellCdf;
use crate::geometry::grid::RegularGrid;
use crate::geometry::partition::CellGeometry;
use crate::io::source::{NumericColumn, Source};
use crate::progress::{Progress, Timings};

/// The input as a mechanism may read it.
pub struct DataPass<'a> {
    pub source: &'a Source,
    /// The used columns, in schema order, with their public bounds in the same order.
    pub columns: &'a [NumericColumn],
    pub bounds: &'a [ColumnBounds],
    pub nulls: NullPolicy,
    pub progress: &'a Progress,
}

impl DataPass<'_> {
    pub fn dims(&self) -> usize {
        self.columns.len()
    }

    /// The rows of a public `encoding`'s columns as bit planes (covloss, microagg).
    pub fn bits(&self, encoding: &Encoding) -> Result<BitRows> {
        read_bits(self.source, encoding, self.progress)
    }

    /// Rows in the file's metadata: public under replace; under add-remove only a guess to plan work
    /// with (never a release).
    pub fn file_rows(&self) -> u64 {
        self.source.row_count()
    }

    /// The leaf histogram of the dyadic partition `geometry` on `device`, what the scan saw, and the
    /// binner's line for the report.
    pub fn leaf_counts(
        &self,
        geometry: CellGeometry,
        device: DeviceChoice,
        timings: &mut Timings,
    ) -> Result<(Vec<u64>, ScanStats, String)> {
        self.leaf_counts_on(geometry, &AxisPlan::for_geometry(&geometry, self.bounds), device, timings)
    }

    /// As [`leaf_counts`](Self::leaf_counts), each axis cut at the quantiles of its released marginal
    /// `warps[k]` instead of into equal cells (the quantile partition).
    pub fn warped_leaf_counts(
        &self,
        geometry: CellGeometry,
        warps: &[Arc<CellCdf>],
        device: DeviceChoice,
        timings: &mut Timings,
    ) -> Result<(Vec<u64>, ScanStats, String)> {
        let axes: Vec<AxisPlan> = self
            .bounds
            .iter()
            .zip(warps)
            .enumerate()
            .map(|(axis, (bounds, warp))| AxisPlan::warped(bounds.clone(), geometry.axis_bits(axis), warp.clone()))
            .collect();
        self.leaf_counts_on(geometry, &axes, device, timings)
    }

    fn leaf_counts_on(
        &self,
        geometry: CellGeometry,
        axes: &[AxisPlan],
        device: DeviceChoice,
        timings: &mut Timings,
    ) -> Result<(Vec<u64>, ScanStats, String)> {
        let bar = self.progress.phase("bin", self.source.row_count(), "rows");
        let (source, columns, nulls) = (self.source, self.columns, self.nulls);
        let outcome = match ChosenBinner::for_run(device, geometry)? {
            ChosenBinner::Cpu(binner, line) => {
                let (leaves, stats) = scan_leaf_counts(source, columns, axes, nulls, &binner, &bar, timings)?;
                (leaves, stats, line)
            }
            #[cfg(feature = "gpu")]
            ChosenBinner::Gpu(binner, line) => {
                let (leaves, stats) = scan_leaf_counts(source, columns, axes, nulls, &binner, &bar, timings)?;
                (leaves, stats, line)
            }
        };
        bar.finish();
        Ok(outcome)
    }

    /// What a pass over the used columns sees (rows binned, dropped, clamped) without binning: the true
    /// row count n̂ releases, when nothing else needs the data yet.
    pub fn count_rows(&self) -> Result<ScanStats> {
        struct Discard;
        impl BinnerWorker for Discard {
            fn add_batch(&mut self, _axes: &[&[u32]]) -> Result<()> {
                Ok(())
            }
        }
        let axes: Vec<AxisPlan> = self.bounds.iter().map(|bounds| AxisPlan::with_cells(bounds.clone(), 1)).collect();
        Ok(self.fold_quantised_rows("count", &axes, &|| Ok(Discard))?.1)
    }

    /// The histogram of `grid`'s equal cubes (CPU), and what the scan saw.
    pub fn grid_counts(&self, grid: &RegularGrid) -> Result<(Vec<u64>, ScanStats)> {
        let axes: Vec<AxisPlan> = self
            .bounds
            .iter()
            .map(|bounds| AxisPlan::with_cells(bounds.clone(), grid.cells_per_axis()))
            .collect();
        let bar = self.progress.phase("bin", self.source.row_count(), "rows");
        let outcome = scan_leaf_counts(
            self.source,
            self.columns,
            &axes,
            self.nulls,
            &GridBinner::new(*grid),
            &bar,
            &mut Timings::default(),
        )?;
        bar.finish();
        Ok(outcome)
    }

    /// Every row quantised by `axes`, folded by one worker per thread (made by `new_worker`), under the
    /// progress label `label`; the workers come back for the caller to merge.
    pub fn fold_quantised_rows<W: BinnerWorker>(
        &self,
        label: &str,
        axes: &[AxisPlan],
        new_worker: &(dyn Fn() -> Result<W> + Sync),
    ) -> Result<(Vec<W>, ScanStats)> {
        let bar = self.progress.phase(label, self.source.row_count(), "rows");
        let outcome =
            scan_quantised_rows(self.source, self.columns, axes, self.nulls, new_worker, &bar)?;
        bar.finish();
        Ok(outcome)
    }
}
