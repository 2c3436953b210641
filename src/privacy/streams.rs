//! The registry of noise streams. Every noisy release of a run draws from the run's secret key through
//! one stream id (`NoiseKey::stream(id, chunk)`), and no two releases may share an id: two releases
//! drawing the same bits would have correlated noise. Each release names its stream here, and only here
//! are stream ids written down.

use crate::geometry::partition::MAX_DEPTH;

/// Cells noised by one stream of a release that chunks its cells. A constant, so the output does not depend
/// on the thread count.
pub const NOISE_CHUNK_CELLS: usize = 1 << 14;

/// Which noise stream a release draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoiseStream {
    /// Level j of a PMM tree (0 ≤ j ≤ MAX_DEPTH), chunked by cell position. lowdim's inner PMM uses the
    /// same streams: one run has one tree.
    PmmLevel(u32),
    /// lowdim's covariance entries.
    LowdimCovariance,
    /// lowdim's mean.
    LowdimMean,
    /// The cells of lowdim's inner PSMM.
    LowdimInnerPsmmCells,
    /// The cells of PSMM on the input cube.
    PsmmCells,
    /// The noisy row count n̂ released first under add-remove.
    RowCount,
    /// Private Evolution's discrete Gaussian on the nearest-neighbour counts, chunked by
    /// (step, chunk of candidates) ([`crate::mechanism::pe`]).
    PeGaussianCounts,
    /// Private Evolution's discrete Laplace on the counts of its laplace-threshold variant, chunked alike.
    PeLaplaceCounts,
    /// covloss: the pair counts of the second moment.
    CovlossSecondMoment,
    /// covloss: the cell counts (weights).
    CovlossWeights,
    /// covloss: the damped centroids.
    CovlossCentroids,
    /// The noise key of one column's marginal tree (chunk = the column): PMM's level streams under a key
    /// of its own ([`crate::privacy::RunSeeds::for_marginal`]).
    PmmMarginalKey,
    /// A coded column's marginal histogram (`--marginal-share`) under that column's key, its codes' cells
    /// drawn in order.
    MarginalHistogram,
    /// One column pair's 2-D histogram (`--pair-share`; chunk = parent · d + child, its cells drawn in
    /// order from that one stream).
    PairHistogram,
    /// The noisy scores that choose `--pair-share`'s pairs (chunk 0: every pair's score in order).
    PairSelection,
    /// One column's adaptive marginal's split decisions (`--marginal-share` at a shallow depth), under
    /// that column's key, drawn level by level, each level's nodes in order.
    MarginalSplits,
    /// The counts of one column's adaptive marginal's cells, under that column's key, drawn in order.
    MarginalCellCounts,
    /// The sub-cells of one refined leaf of the joint tree (`--refine-share`; chunk = the leaf), drawn in
    /// order.
    PmmRefinedLeaf,
    /// One cell of the online tree (chunk = the cell's heap index 2^depth + code): its checks, the
    /// thresholds of its later segments and its Binary Mechanism, drawn in order and resumed from a
    /// saved position.
    OnlineCell,
    /// The level noise of the online tree's cells (chunk = level, depth and block of cells): each cell's
    /// S̃ update and first threshold of a level, drawn in cell order, so a level's start opens no cell's
    /// own stream.
    OnlineLevel,
    /// The exponential mechanisms of `--private-bounds` (chunk = 2 · the column's index among the released
    /// columns, + 1 for its upper end).
    PrivateBounds,
}

impl NoiseStream {
    /// The stream id. These values fix the bits of seeded runs: changing one changes every seeded
    /// output that uses it.
    pub const fn id(self) -> u32 {
        match self {
            NoiseStream::PmmLevel(level) => level,
            NoiseStream::LowdimCovariance => 40,
            NoiseStream::LowdimMean => 41,
            NoiseStream::LowdimInnerPsmmCells => 42,
            NoiseStream::PsmmCells => 62,
            NoiseStream::RowCount => 63,
            NoiseStream::PeGaussianCounts => 110,
            NoiseStream::PeLaplaceCounts => 111,
            NoiseStream::CovlossSecondMoment => 120,
            NoiseStream::CovlossWeights => 121,
            NoiseStream::CovlossCentroids => 122,
            NoiseStream::OnlineCell => 100,
            NoiseStream::OnlineLevel => 101,
            NoiseStream::PmmMarginalKey => 130,
            NoiseStream::PairHistogram => 131,
            NoiseStream::MarginalHistogram => 132,
            NoiseStream::PairSelection => 133,
            NoiseStream::MarginalSplits => 136,
            NoiseStream::MarginalCellCounts => 137,
            NoiseStream::PmmRefinedLeaf => 135,
            NoiseStream::PrivateBounds => 140,
        }
    }

    /// Every stream a run can use (PMM levels up to [`MAX_DEPTH`]).
    pub fn all() -> impl Iterator<Item = NoiseStream> {
        (0..=MAX_DEPTH).map(NoiseStream::PmmLevel).chain([
            NoiseStream::LowdimCovariance,
            NoiseStream::LowdimMean,
            NoiseStream::LowdimInnerPsmmCells,
            NoiseStream::PsmmCells,
            NoiseStream::RowCount,
            NoiseStream::PeGaussianCounts,
            NoiseStream::PeLaplaceCounts,
            NoiseStream::CovlossSecondMoment,
            NoiseStream::CovlossWeights,
            NoiseStream::CovlossCentroids,
            NoiseStream::OnlineCell,
            NoiseStream::OnlineLevel,
            NoiseStream::PmmMarginalKey,
            NoiseStream::PairHistogram,
            NoiseStream::MarginalHistogram,
            NoiseStream::PairSelection,
            NoiseStream::MarginalSplits,
            NoiseStream::MarginalCellCounts,
            NoiseStream::PmmRefinedLeaf,
            NoiseStream::PrivateBounds,
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_two_streams_share_an_id() {
        let mut ids: Vec<u32> = NoiseStream::all().map(NoiseStream::id).collect();
        let streams = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), streams, "two releases would draw the same noise");
    }
}
