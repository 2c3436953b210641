//! The per-thread histogram every CPU binner fills: u32 bins (half the memory traffic of u64 on the hot
//! path), spilled into u64 totals before any bin could overflow, summed across threads at the end.

use rayon::prelude::*;

/// Cells per merge task: large enough that scheduling costs nothing next to the memory traffic.
const MERGE_MIN_CELLS: usize = 1 << 14;

pub struct SpillingHistogram {
    counts: Vec<u32>,
    /// Rows counted since `counts` was last spilled into `totals`, so no u32 bin can overflow.
    pub(super) rows_in_counts: u64,
    totals: Option<Vec<u64>>,
}

impl SpillingHistogram {
    pub fn new(cells: usize) -> Self {
        SpillingHistogram {
            counts: vec![0; cells],
            rows_in_counts: 0,
            totals: None,
        }
    }

    /// The bins, ready to take `rows` more increments without overflowing (spilling first if needed).
    pub fn bins_for(&mut self, rows: usize) -> &mut [u32] {
        if self.rows_in_counts + rows as u64 > u64::from(u32::MAX) {
            self.spill();
        }
        self.rows_in_counts += rows as u64;
        &mut self.counts
    }

    /// The cell-by-cell totals of every worker's histogram (each of `cells` cells), in one parallel pass
    /// that reads each histogram once and writes each total once: no zeroed array added into worker by
    /// worker, and no spill first (a spill would allocate a u64 array per worker and fill it on one
    /// thread).
    pub fn sum_all(histograms: &[SpillingHistogram], cells: usize) -> Vec<u64> {
        debug_assert!(histograms.iter().all(|histogram| histogram.counts.len() == cells));
        let mut totals = Vec::new();
        (0..cells)
            .into_par_iter()
            .with_min_len(MERGE_MIN_CELLS)
            .map(|cell| {
                histograms
                    .iter()
                    .map(|histogram| {
                        u64::from(histogram.counts[cell]) + histogram.totals.as_ref().map_or(0, |spilled| spilled[cell])
                    })
                    .sum::<u64>()
            })
            .collect_into_vec(&mut totals);
        totals
    }

    fn spill(&mut self) {
        if self.rows_in_counts == 0 {
            return;
        }
        let totals = self
            .totals
            .get_or_insert_with(|| vec![0; self.counts.len()]);
        for (total, count) in totals.iter_mut().zip(self.counts.iter_mut()) {
            *total += u64::from(std::mem::take(count));
        }
        self.rows_in_counts = 0;
    }
}

/// A cell index as a pair histogram's rows hold it.
pub trait PairCell: Copy {
    fn index(self) -> usize;
}

impl PairCell for u16 {
    #[inline]
    fn index(self) -> usize {
        usize::from(self)
    }
}

impl PairCell for u32 {
    #[inline]
    fn index(self) -> usize {
        self as usize
    }
}

/// Counts rows `first[i]`, `second[i]` into `counts` (cell `first · columns + second`), four rows at a time
/// into four histograms (`counts` and three in `spare`, zero before and after): rows in the same cell one
/// after another (low-cardinality columns, or rows drawn in cell order) make each increment wait on the
/// last one's store, and four histograms keep four such chains apart. Exact, as integer counts are.
pub fn count_pair<C: PairCell>(counts: &mut [u64], spare: &mut Vec<u64>, (first, second): (&[C], &[C]), columns: usize) {
    let size = counts.len();
    if spare.len() < 3 * size {
        spare.resize(3 * size, 0);
    }
    let (one, rest) = spare.split_at_mut(size);
    let (two, three) = rest.split_at_mut(size);
    let three = &mut three[..size];
    let (firsts, seconds) = (first.chunks_exact(4), second.chunks_exact(4));
    let tail = firsts.remainder().iter().zip(seconds.remainder());
    for (f, s) in firsts.zip(seconds) {
        counts[f[0].index() * columns + s[0].index()] += 1;
        one[f[1].index() * columns + s[1].index()] += 1;
        two[f[2].index() * columns + s[2].index()] += 1;
        three[f[3].index() * columns + s[3].index()] += 1;
    }
    for (&f, &s) in tail {
        counts[f.index() * columns + s.index()] += 1;
    }
    for (((count, one), two), three) in counts.iter_mut().zip(one).zip(two).zip(three) {
        *count += *one + *two + *three;
        (*one, *two, *three) = (0, 0, 0);
    }
}
