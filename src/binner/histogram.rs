//! The per-thread histogram every CPU binner fills: u32 bins (half the memory traffic of u64 on the hot
//! path), spilled into u64 totals before any bin could overflow, summed across threads at the end.

use rayon::prelude::*;

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

    /// Adds everything counted into `totals` (one entry per cell), in parallel over cells and without
    /// spilling first: a spill would allocate a u64 array per worker and fill it on one thread.
    pub fn add_into(self, totals: &mut [u64]) {
        let counts = self.counts.par_iter();
        match &self.totals {
            Some(spilled) => totals
                .par_iter_mut()
                .zip(counts.zip(spilled.par_iter()))
                .for_each(|(total, (&count, &spilled))| *total += u64::from(count) + spilled),
            None => totals
                .par_iter_mut()
                .zip(counts)
                .for_each(|(total, &count)| *total += u64::from(count)),
        }
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
