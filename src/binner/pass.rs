//! The data access of a release: one pass over the input's used columns, quantised with their public
//! bounds, under the run's null policy and on the run's binning device. Mechanisms see the private data
//! only through a [`DataPass`], and only as histograms, per-thread folds of quantised rows, or (covloss,
//! microagg) the bit planes of a public encoding. Across ranks ([`DataPass::ranks`]) each rank reads its
//! share of the row groups and every histogram a pass returns is the whole table's (the bit planes are the
//! rank's own rows).

use std::borrow::Cow;
use std::sync::Arc;

use rayon::prelude::*;

use super::cpu::CpuBinner;
use super::device::{ChosenBinner, DeviceChoice};
use super::grid::GridBinner;
use super::histogram::{count_pair, SpillingHistogram};
use super::{scan_leaf_counts, scan_quantised_rows, AxisPlan, BinnerWorker, NullPolicy, ScanStats};
use crate::encoding::read::{read_bits, BitRows};
use crate::encoding::Encoding;
use crate::error::{Error, Result};
use crate::geometry::bounds::ColumnBounds;
use crate::geometry::cdf::CellCdf;
use crate::geometry::grid::RegularGrid;
use crate::geometry::partition::CellGeometry;
use crate::io::source::{NumericColumn, Source};
use crate::progress::{Progress, Timings};
use crate::ranks::{agree, RankSums};

/// The input as a mechanism may read it.
pub struct DataPass<'a> {
    pub source: &'a Source,
    /// The used columns, in schema order, with their public bounds in the same order.
    pub columns: &'a [NumericColumn],
    pub bounds: &'a [ColumnBounds],
    pub nulls: NullPolicy,
    pub progress: &'a Progress,
    /// `Some` for a release replicated across ranks (`source` is this rank's share of the row groups): every
    /// rank's pass ends in the same sums, so its histograms and scan statistics are the whole table's and
    /// the release is the single machine's; a rank that fails a pass fails it on every rank. `None` on one
    /// machine, and for PMM's split release, whose ranks exchange their own counts (`pmm::release::Backend`).
    pub ranks: Option<&'a (dyn RankSums + Sync)>,
}

impl DataPass<'_> {
    pub fn dims(&self) -> usize {
        self.columns.len()
    }

    /// The rows of a public `encoding`'s columns as bit planes (covloss, microagg). Across ranks, this
    /// rank's share of them (agreed by every rank): covloss sums what it counts from them
    /// ([`Self::sum_over_ranks`]).
    pub fn bits(&self, encoding: &Encoding) -> Result<BitRows> {
        self.agreed(read_bits(self.source, encoding, self.progress))
    }

    /// `outcome` of this rank's pass, made the whole table's: across ranks, agreed by every rank (one that
    /// failed fails them all) and then `sum`med over the ranks; on one machine, as it is.
    fn whole_table<T>(&self, outcome: Result<T>, sum: impl FnOnce(&mut T, &dyn RankSums)) -> Result<T> {
        let Some(ranks) = self.ranks else { return outcome };
        let mut outcome = agree(ranks, outcome)?;
        sum(&mut outcome, ranks);
        Ok(outcome)
    }

    /// `outcome` of a step a rank may fail alone (choosing its binning device), agreed by every rank.
    pub fn agreed<T>(&self, outcome: Result<T>) -> Result<T> {
        self.whole_table(outcome, |_, _| ())
    }

    /// `values` (counts of this rank's rows) summed over the ranks, in place: what a mechanism that merges
    /// the workers of [`Self::fold_quantised_rows`] itself calls on the merged counts. A no-op on one
    /// machine.
    pub fn sum_over_ranks(&self, values: &mut [u64]) {
        if let Some(ranks) = self.ranks {
            ranks.sum(values);
        }
    }

    /// Rows in the file's metadata: public under replace; under add-remove only a guess to plan work
    /// with (never a release). Across ranks, this rank's share's: a plan reads the whole table's from
    /// `PublicInputs::file_rows`.
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
        self.leaf_counts_on(geometry, &self.axes(&geometry, None), device, timings)
    }

    /// How each column is quantised onto `geometry`'s axis: equal cells on its bounds, or cut at the
    /// quantiles of `warps[k]` (the quantile partition).
    pub fn axes(&self, geometry: &CellGeometry, warps: Option<&[Arc<CellCdf>]>) -> Vec<AxisPlan> {
        match warps {
            None => AxisPlan::for_geometry(geometry, self.bounds),
            Some(warps) => self
                .bounds
                .iter()
                .zip(warps)
                .enumerate()
                .map(|(axis, (bounds, warp))| AxisPlan::warped(bounds.clone(), geometry.axis_bits(axis), warp.clone()))
                .collect(),
        }
    }

    /// The leaf histogram of `geometry` with the columns quantised by `axes` ([`DataPass::axes`]).
    pub fn leaf_counts_on(
        &self,
        geometry: CellGeometry,
        axes: &[AxisPlan],
        device: DeviceChoice,
        timings: &mut Timings,
    ) -> Result<(Vec<u64>, ScanStats, String)> {
        let bar = self.progress.phase("bin", self.source.row_count(), "rows");
        let (source, columns, nulls) = (self.source, self.columns, self.nulls);
        let outcome = ChosenBinner::for_run(device, geometry).and_then(|chosen| match chosen {
            ChosenBinner::Cpu(binner, line) => {
                let (leaves, stats) = scan_leaf_counts(source, columns, axes, nulls, &binner, &bar, timings)?;
                Ok((leaves, stats, line))
            }
            #[cfg(feature = "gpu")]
            ChosenBinner::Gpu(binner, line) => {
                let (leaves, stats) = scan_leaf_counts(source, columns, axes, nulls, &binner, &bar, timings)?;
                Ok((leaves, stats, line))
            }
        });
        bar.finish();
        self.whole_table(outcome, |(leaves, stats, _), ranks| {
            ranks.sum(leaves);
            *stats = std::mem::take(stats).summed_over(ranks);
        })
    }

    /// Every row's leaf code on `geometry` (the columns quantised by `axes`), sorted, what the scan saw, and the
    /// binner's words: for leaves that outnumber the rows, where a histogram per thread would be mostly zeros.
    pub fn sorted_leaf_codes(
        &self,
        geometry: CellGeometry,
        axes: &[AxisPlan],
    ) -> Result<(Vec<u32>, ScanStats, String)> {
        if self.ranks.is_some() {
            return Err(Error::internal("sorted leaf codes are not summed across ranks"));
        }
        let binner = CpuBinner::new(geometry);
        let bar = self.progress.phase("bin", self.source.row_count(), "rows");
        let worker = || Ok(binner.code_worker());
        let (workers, scan) = scan_quantised_rows(self.source, self.columns, axes, self.nulls, &worker, &bar)?;
        bar.finish();
        let mut codes = Vec::with_capacity(workers.iter().map(|worker| worker.codes.len()).sum());
        workers.into_iter().for_each(|worker| codes.extend(worker.codes));
        codes.par_sort_unstable();
        Ok((codes, scan, format!("cpu: sorted leaf codes ({:?} deposit)", binner.method())))
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

    /// Every column's own histogram of 2^`depth` equal cells on its bounds (the marginal trees' leaves),
    /// all from one pass on the CPU, and what the scan saw. A row counts in every column's histogram or,
    /// dropped by the null policy, in none: the marginals describe the rows the joint release does.
    pub fn marginal_leaf_counts(&self, depth: u32) -> Result<(Vec<Vec<u64>>, ScanStats)> {
        let (marginals, _, stats) = self.marginal_and_pair_counts(depth, &[], &[])?;
        Ok((marginals, stats))
    }

    /// [`Self::marginal_leaf_counts`] and, from the same pass, [`Self::pair_counts`] of `pairs` on `cuts` (one
    /// per column, none deeper than `depth`): a column's cell among 2^bits equal ones is the top bits of its
    /// 2^`depth` ones, to the bit, since both scales are the same quotient times a power of two.
    pub fn marginal_and_pair_counts(
        &self,
        depth: u32,
        pairs: &[(usize, usize)],
        cuts: &[PairCut],
    ) -> Result<(Vec<Vec<u64>>, Vec<Vec<u64>>, ScanStats)> {
        struct Marginals<'p>(Vec<SpillingHistogram>, PairHistograms<'p>);
        impl BinnerWorker for Marginals<'_> {
            fn add_batch(&mut self, axes: &[&[u32]]) -> Result<()> {
                for (histogram, cells) in self.0.iter_mut().zip(axes) {
                    let bins = histogram.bins_for(cells.len());
                    for &cell in *cells {
                        bins[cell as usize] += 1;
                    }
                }
                self.1.add_batch(axes)
            }
        }
        if !pairs.is_empty() && cuts.iter().any(|cut| cut.bits > depth) {
            return Err(Error::internal("pair cells are counted in the marginals' pass only as deep as its cells"));
        }
        let cells = 1usize << depth;
        let axes: Vec<AxisPlan> = self.bounds.iter().map(|bounds| AxisPlan::new(bounds.clone(), depth)).collect();
        let shifts: Vec<u32> = cuts.iter().map(|cut| depth.saturating_sub(cut.bits)).collect();
        let new_worker = || {
            let marginals = (0..self.dims()).map(|_| SpillingHistogram::new(cells)).collect();
            Ok(Marginals(marginals, PairHistograms::new(pairs, cuts, shifts.clone())))
        };
        let (workers, stats) = self.fold_quantised_rows("marginals", &axes, &new_worker)?;
        let mut by_column: Vec<Vec<SpillingHistogram>> = (0..self.dims()).map(|_| Vec::new()).collect();
        let mut pair_workers = Vec::with_capacity(workers.len());
        for worker in workers {
            for (column, histogram) in worker.0.into_iter().enumerate() {
                by_column[column].push(histogram);
            }
            pair_workers.push(worker.1);
        }
        let mut counts: Vec<Vec<u64>> =
            by_column.iter().map(|histograms| SpillingHistogram::sum_all(histograms, cells)).collect();
        let mut pair_counts = PairHistograms::summed(pair_workers);
        counts.iter_mut().chain(&mut pair_counts).for_each(|counts| self.sum_over_ranks(counts));
        Ok((counts, pair_counts, stats))
    }

    /// The 2-D histogram of each column pair `(a, b)` in `pairs`, each column put in its cells by its cut
    /// (`cuts[a]`), cell `a_cell · cuts[b].cells + b_cell`, all from one pass on the CPU; and what the scan
    /// saw. Rows dropped by the null policy count in none.
    pub fn pair_counts(&self, pairs: &[(usize, usize)], cuts: &[PairCut]) -> Result<(Vec<Vec<u64>>, ScanStats)> {
        let axes: Vec<AxisPlan> =
            self.bounds.iter().zip(cuts).map(|(bounds, cut)| AxisPlan::new(bounds.clone(), cut.bits)).collect();
        let new_worker = || Ok(PairHistograms::new(pairs, cuts, vec![0; cuts.len()]));
        let (workers, stats) = self.fold_quantised_rows("pairs", &axes, &new_worker)?;
        let mut counts = PairHistograms::summed(workers);
        counts.iter_mut().for_each(|counts| self.sum_over_ranks(counts));
        Ok((counts, stats))
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
        );
        bar.finish();
        self.whole_table(outcome, |(counts, stats), ranks| {
            ranks.sum(counts);
            *stats = std::mem::take(stats).summed_over(ranks);
        })
    }

    /// Every row quantised by `axes`, folded by one worker per thread (made by `new_worker`), under the
    /// progress label `label`; the workers come back for the caller to merge. Across ranks the scan
    /// statistics are the whole table's but the workers fold this rank's rows: the caller sums what they
    /// merge to ([`Self::sum_over_ranks`]).
    pub fn fold_quantised_rows<W: BinnerWorker>(
        &self,
        label: &str,
        axes: &[AxisPlan],
        new_worker: &(dyn Fn() -> Result<W> + Sync),
    ) -> Result<(Vec<W>, ScanStats)> {
        let bar = self.progress.phase(label, self.source.row_count(), "rows");
        let outcome = scan_quantised_rows(self.source, self.columns, axes, self.nulls, new_worker, &bar);
        bar.finish();
        self.whole_table(outcome, |(_, stats), ranks| *stats = std::mem::take(stats).summed_over(ranks))
    }
}

/// How a pair histogram puts one column's rows in its cells: the column quantised to 2^`bits` equal cells of
/// its public bounds, cell k then in cell `groups[k]` of `cells` (`None`: in cell k, of 2^`bits`).
#[derive(Clone, Debug, PartialEq)]
pub struct PairCut {
    pub bits: u32,
    pub groups: Option<Vec<u32>>,
    pub cells: usize,
}

impl PairCut {
    /// 2^`bits` equal cells.
    pub fn equal(bits: u32) -> PairCut {
        PairCut { bits, groups: None, cells: 1 << bits }
    }

    /// The cell of each of the 2^`bits` equal ones.
    pub fn groups(&self) -> Cow<'_, [u32]> {
        match &self.groups {
            Some(groups) => Cow::Borrowed(groups),
            None => Cow::Owned((0..1 << self.bits).collect()),
        }
    }
}

/// One thread's pair histograms ([`DataPass::pair_counts`]) of rows quantised `shifts[column]` bits finer
/// than their cut.
struct PairHistograms<'p> {
    pairs: &'p [(usize, usize)],
    cuts: &'p [PairCut],
    shifts: Vec<u32>,
    counts: Vec<Vec<u64>>,
    /// Each column's cut cell of every row of the batch, worked out once per column rather than once per
    /// pair (a column is in d − 1 pairs): the pairs' loops then read two short arrays each and count.
    cells: Vec<Vec<u16>>,
    /// [`count_pair`]'s spare histograms.
    spare: Vec<u64>,
}

impl<'p> PairHistograms<'p> {
    fn new(pairs: &'p [(usize, usize)], cuts: &'p [PairCut], shifts: Vec<u32>) -> Self {
        let counts = pairs.iter().map(|&(a, b)| vec![0; cuts[a].cells * cuts[b].cells]).collect();
        let cells = if pairs.is_empty() { Vec::new() } else { vec![Vec::new(); cuts.len()] };
        PairHistograms { pairs, cuts, shifts, counts, cells, spare: Vec::new() }
    }

    /// The threads' histograms added up (each pair's, in `pairs` order).
    fn summed(workers: Vec<PairHistograms>) -> Vec<Vec<u64>> {
        let mut workers = workers.into_iter();
        let Some(first) = workers.next() else { return Vec::new() };
        let mut counts = first.counts;
        for worker in workers {
            for (total, part) in counts.iter_mut().zip(worker.counts) {
                total.iter_mut().zip(part).for_each(|(total, count)| *total += count);
            }
        }
        counts
    }

    /// A column's cut cells of the batch's rows (`indices`, `shift` bits finer) into `cells`; false where
    /// they do not fit in 16 bits.
    fn cut_cells(cut: &PairCut, shift: u32, indices: &[u32], cells: &mut Vec<u16>) -> bool {
        if cut.cells > 1 << 16 {
            return false;
        }
        cells.clear();
        match &cut.groups {
            None => cells.extend(indices.iter().map(|&index| (index >> shift) as u16)),
            Some(groups) => cells.extend(indices.iter().map(|&index| groups[(index >> shift) as usize] as u16)),
        }
        true
    }
}

impl BinnerWorker for PairHistograms<'_> {
    fn add_batch(&mut self, axes: &[&[u32]]) -> Result<()> {
        if self.pairs.is_empty() {
            return Ok(());
        }
        let fits = (self.cuts.iter().zip(&self.shifts).zip(axes).zip(&mut self.cells))
            .all(|(((cut, &shift), indices), cells)| Self::cut_cells(cut, shift, indices, cells));
        if fits {
            for (&(a, b), counts) in self.pairs.iter().zip(&mut self.counts) {
                count_pair(counts, &mut self.spare, (&self.cells[a], &self.cells[b]), self.cuts[b].cells);
            }
            return Ok(());
        }
        // A cut of more than 2^16 cells (a long code list's own cells): each pair from the quantised rows.
        for (&(a, b), counts) in self.pairs.iter().zip(&mut self.counts) {
            let (first_shift, second_shift) = (self.shifts[a], self.shifts[b]);
            let (first_cut, second_cut) = (&self.cuts[a], &self.cuts[b]);
            let rows = axes[a].iter().zip(axes[b]);
            match (&first_cut.groups, &second_cut.groups) {
                // Equal cells on both: the cell's index is the two cells' bits side by side.
                (None, None) => {
                    let bits = second_cut.bits;
                    for (&first, &second) in rows {
                        counts[(((first >> first_shift) << bits) | (second >> second_shift)) as usize] += 1;
                    }
                }
                _ => {
                    let (first_groups, second_groups) = (first_cut.groups(), second_cut.groups());
                    let cells = second_cut.cells;
                    for (&first, &second) in rows {
                        let first = first_groups[(first >> first_shift) as usize] as usize;
                        counts[first * cells + second_groups[(second >> second_shift) as usize] as usize] += 1;
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binner::device::DeviceChoice;
    use crate::mechanism::pmm::coarsen_leaves;
    use arrow::array::{ArrayRef, Float64Array};
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::record_batch::RecordBatch;

    /// Three columns of 5 000 rows: values spread over and beyond the bounds, the bounds themselves, and
    /// (column c) a null every 7th row.
    fn table() -> Source {
        let fields = ["a", "b", "c"].map(|name| Field::new(name, DataType::Float64, true));
        let schema = Arc::new(Schema::new(fields.to_vec()));
        let value = |row: usize, column: usize| ((row * (7 + 3 * column)) % 1013) as f64 / 1000.0 - 0.005;
        let columns: Vec<ArrayRef> = (0..3)
            .map(|column| {
                let values: Float64Array = (0..5000)
                    .map(|row| match row {
                        _ if column == 2 && row % 7 == 3 => None,
                        0 => Some(0.0),
                        1 => Some(1.0),
                        _ => Some(value(row, column)),
                    })
                    .collect();
                Arc::new(values) as ArrayRef
            })
            .collect();
        Source::from_batches("table", schema.clone(), vec![RecordBatch::try_new(schema, columns).unwrap()]).unwrap()
    }

    #[test]
    fn one_pass_gives_every_column_the_histogram_of_its_own_pass_and_coarsens_exactly() {
        let source = table();
        let names = ["a", "b", "c"].map(String::from);
        let columns = source.numeric_columns(&names).unwrap();
        let bounds: Vec<ColumnBounds> = names.iter().map(|name| ColumnBounds::new(name, 0.0, 1.0).unwrap()).collect();
        let progress = Progress::hidden();
        let pass = |range: std::ops::Range<usize>, nulls| DataPass {
            source: &source,
            columns: &columns[range.clone()],
            bounds: &bounds[range],
            nulls,
            progress: &progress,
            ranks: None,
        };
        // Columns a and b have no nulls: each one's histogram is the one its own 1-D pass bins.
        let (deep, _) = pass(0..2, NullPolicy::Error).marginal_leaf_counts(9).unwrap();
        for depth in [0, 4, 9] {
            let (counts, stats) = pass(0..2, NullPolicy::Error).marginal_leaf_counts(depth).unwrap();
            assert_eq!(stats.rows_binned, 5000);
            for column in 0..2 {
                let alone = pass(column..column + 1, NullPolicy::Error)
                    .leaf_counts(CellGeometry::new(1, depth), DeviceChoice::Cpu, &mut Timings::default())
                    .unwrap()
                    .0;
                assert_eq!(counts[column], alone, "column {column}, depth {depth}");
                assert_eq!(counts[column], coarsen_leaves(deep[column].clone(), 9, depth), "column {column}, depth {depth}");
            }
        }
        // A row dropped for column c's null is left out of every column's histogram.
        let (counts, stats) = pass(0..3, NullPolicy::Drop).marginal_leaf_counts(4).unwrap();
        assert_eq!(stats.rows_binned, 5000 - 5000 / 7);
        for histogram in &counts {
            assert_eq!(histogram.iter().sum::<u64>(), stats.rows_binned);
        }
    }

    #[test]
    fn pairs_on_a_cut_past_16_bits_are_the_narrower_cuts_refined() {
        // A cut of 2^17 cells takes the pass's path for long code lists (no 16-bit cells): its histograms,
        // summed over the low bits, are the histograms on 2^12 cells (the top bits, to the bit); as a cut of
        // 2^16 cells (16-bit cells) is on 2^11.
        let source = table();
        let names = ["a", "b", "c"].map(String::from);
        let columns = source.numeric_columns(&names).unwrap();
        let bounds: Vec<ColumnBounds> = names.iter().map(|name| ColumnBounds::new(name, -0.37, 0.91).unwrap()).collect();
        let progress = Progress::hidden();
        let (columns, bounds, progress) = (&columns, &bounds, &progress);
        let pass = DataPass { source: &source, columns, bounds, nulls: NullPolicy::Drop, progress, ranks: None };
        let pairs = [(0, 1), (2, 0), (1, 2)];
        let mut failed = Vec::new();
        for top in [17, 16] {
            let (wide, narrow) = ([top, 2, 3].map(PairCut::equal), [top - 5, 2, 3].map(PairCut::equal));
            let (_, counted, _) = pass.marginal_and_pair_counts(top, &pairs, &wide).unwrap();
            let (own, _) = pass.pair_counts(&pairs, &narrow).unwrap();
            for ((&(a, b), counted), own) in pairs.iter().zip(&counted).zip(&own) {
                let mut summed = vec![0; narrow[a].cells * narrow[b].cells];
                for (cell, &count) in counted.iter().enumerate() {
                    let (x, y) = (cell >> wide[b].bits, cell & ((1 << wide[b].bits) - 1));
                    let (x, y) = (x >> (wide[a].bits - narrow[a].bits), y >> (wide[b].bits - narrow[b].bits));
                    summed[x * narrow[b].cells + y] += count;
                }
                let first = summed.iter().zip(own).position(|(x, y)| x != y);
                if let Some(first) = first {
                    let totals = (summed.iter().sum::<u64>(), own.iter().sum::<u64>());
                    let lengths = (summed.len(), own.len());
                    failed.push(format!("top {top}, pair ({a}, {b}): cell {first} of {lengths:?}, totals {totals:?}"));
                }
            }
        }
        assert!(failed.is_empty(), "{failed:#?}");
    }

    #[test]
    fn pairs_counted_in_the_marginals_pass_are_the_pairs_own_pass() {
        let source = table();
        let names = ["a", "b", "c"].map(String::from);
        let columns = source.numeric_columns(&names).unwrap();
        let progress = Progress::hidden();
        // Widths that are not powers of two, so each depth's scale is a rounded quotient; values sit on
        // and beyond the bounds, and on many cells' edges (value(row, column) is a multiple of 1/1000).
        for (lo, hi) in [(0.0, 1.0), (-0.37, 0.91), (0.001, 0.3), (-120.0, 1440.0)] {
            let bounds: Vec<ColumnBounds> = names.iter().map(|name| ColumnBounds::new(name, lo, hi).unwrap()).collect();
            let nulls = NullPolicy::Drop;
            let (columns, bounds, progress) = (&columns, &bounds, &progress);
            let pass = DataPass { source: &source, columns, bounds, nulls, progress, ranks: None };
            let pairs = [(0, 1), (2, 0), (1, 2)];
            // Each column at a depth of its own.
            let cuts = [5, 7, 6].map(PairCut::equal);
            let (own, own_stats) = pass.pair_counts(&pairs, &cuts).unwrap();
            for depth in [7, 9, 13] {
                let (marginals, counted, stats) = pass.marginal_and_pair_counts(depth, &pairs, &cuts).unwrap();
                assert_eq!(counted, own, "bounds {lo}:{hi}, depth {depth}");
                assert_eq!(stats.rows_binned, own_stats.rows_binned);
                assert_eq!(marginals, pass.marginal_leaf_counts(depth).unwrap().0);
            }
            assert!(pass.marginal_and_pair_counts(6, &pairs, &cuts).is_err(), "pair cells finer than the pass's");
            // Cells grouped in the pass are the equal cells' counts summed by group.
            let grouping = |bits: u32, cells: u32| (0..1u32 << bits).map(|cell| (cell * cells) >> bits).collect::<Vec<_>>();
            let grouped: Vec<PairCut> = cuts
                .iter()
                .zip([3, 10, 1])
                .map(|(cut, cells)| PairCut { bits: cut.bits, groups: Some(grouping(cut.bits, cells)), cells: cells as usize })
                .collect();
            let (in_groups, _) = pass.pair_counts(&pairs, &grouped).unwrap();
            for ((&(a, b), own), in_groups) in pairs.iter().zip(&own).zip(&in_groups) {
                let (first, second) = (grouped[a].groups(), grouped[b].groups());
                let mut summed = vec![0; grouped[a].cells * grouped[b].cells];
                for (cell, &count) in own.iter().enumerate() {
                    let (x, y) = (cell >> cuts[b].bits, cell & ((1 << cuts[b].bits) - 1));
                    summed[first[x] as usize * grouped[b].cells + second[y] as usize] += count;
                }
                assert_eq!(&summed, in_groups, "pair ({a}, {b}) in groups");
            }
        }
    }
}
