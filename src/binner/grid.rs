//! The regular-grid binner (PSMM): per-thread u32 histograms over the k^d cells of a
//! [`RegularGrid`], cell index = Σ_k q_k·stride_k in row-major order. CPU only: the pass is bound by
//! Parquet decoding, and PSMM's cost is in the projection, not here.

use crate::error::Result;
use crate::geometry::grid::RegularGrid;

use super::histogram::SpillingHistogram;
use super::{Binner, BinnerWorker};

pub struct GridBinner {
    grid: RegularGrid,
}

impl GridBinner {
    pub fn new(grid: RegularGrid) -> Self {
        GridBinner { grid }
    }
}

pub struct GridWorker {
    strides: Vec<usize>,
    histogram: SpillingHistogram,
    cells: Vec<usize>,
}

impl Binner for GridBinner {
    type Worker = GridWorker;

    fn worker(&self) -> Result<GridWorker> {
        Ok(GridWorker {
            strides: self.grid.strides(),
            histogram: SpillingHistogram::new(self.grid.cell_count()),
            cells: Vec::new(),
        })
    }

    fn finish(&self, workers: Vec<GridWorker>) -> Result<Vec<u64>> {
        let histograms: Vec<SpillingHistogram> = workers.into_iter().map(|worker| worker.histogram).collect();
        Ok(SpillingHistogram::sum_all(&histograms, self.grid.cell_count()))
    }
}

impl BinnerWorker for GridWorker {
    /// `axes[k][i]` is row i's cell index on axis k, below k (the quantiser clamps it there).
    fn add_batch(&mut self, axes: &[&[u32]]) -> Result<()> {
        let rows = axes.first().map_or(0, |axis| axis.len());
        self.cells.clear();
        self.cells.resize(rows, 0);
        for (indices, &stride) in axes.iter().zip(&self.strides) {
            for (cell, &index) in self.cells.iter_mut().zip(indices.iter()) {
                *cell += index as usize * stride;
            }
        }
        let bins = self.histogram.bins_for(rows);
        for &cell in &self.cells {
            bins[cell] += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binner::AxisPlan;
    use crate::geometry::bounds::ColumnBounds;

    #[test]
    fn cells_follow_the_regular_quantisation_and_merge_across_workers() {
        let grid = RegularGrid::new(2, 3).unwrap();
        let axis = AxisPlan::with_cells(ColumnBounds::new("x", -1.0, 2.0).unwrap(), 3);
        // Cells of width 1 on [−1, 2]: −1 → 0, −0.01 → 0, 0 → 1, 1.99 → 2, 2 (top, closed) → 2, 9 → 2.
        let values = [-1.0, -0.01, 0.0, 1.99, 2.0, 9.0, -5.0];
        let indices: Vec<u32> = values.iter().map(|&v| axis.quantize(v)).collect();
        assert_eq!(indices, [0, 0, 1, 2, 2, 2, 0]);
        let binner = GridBinner::new(grid);
        let mut first = binner.worker().unwrap();
        let mut second = binner.worker().unwrap();
        let zeros = vec![0u32; indices.len()];
        first.add_batch(&[&indices, &zeros]).unwrap();
        first.histogram.rows_in_counts = u64::from(u32::MAX) - 2; // force a spill on the next batch
        first.add_batch(&[&zeros, &indices]).unwrap();
        second.add_batch(&[&indices[..2], &indices[..2]]).unwrap();
        let counts = binner.finish(vec![first, second]).unwrap();
        // Row-major, axis 0 most significant: cell = 3·q_0 + q_1.
        let mut expected = vec![0u64; 9];
        for &q in &indices {
            expected[3 * q as usize] += 1;
            expected[q as usize] += 1;
        }
        expected[0] += 2;
        assert_eq!(counts, expected);
    }
}
