//! Piecewise-linear CDFs on [0,1] of counts on equal cells (each cell's mass spread uniformly over it):
//! the released 1-D marginals as maps, for marginal calibration and for the quantile partition's axes.

/// The CDF on [0,1] of counts on equal cells, each spread uniformly over its cell: piecewise linear.
#[derive(Clone, Debug, PartialEq)]
pub struct CellCdf {
    /// cumulative[j] = share of the mass in cells 0..j (cumulative[0] = 0, the last = 1).
    cumulative: Vec<f64>,
    /// guide[b] = the first cell whose upper cumulative reaches b/cells (b = 0..=cells): the cell where F
    /// reaches u lies between the guides of u's neighbouring buckets, so [`inverse`](Self::inverse)
    /// searches a few cells instead of all of them (sampling maps every value through it).
    guide: Vec<u32>,
    /// brackets[b] = the two cells [`inverse`](Self::inverse) chooses between for every u in bucket b and its
    /// neighbours (finer buckets than the guide's, [`bracket_buckets`]): the first cell holding mass whose
    /// upper cumulative reaches the three buckets, and the next cell holding mass, whose upper cumulative
    /// reaches past them (the same cell twice where the first spans them all); [`NO_CELL`] twice where
    /// two cells end inside them. One comparison then picks the cell without a branch, and most values
    /// need no search: on a flat 2^13-cell marginal the calibration map takes half the time it took when a
    /// bucket kept only a cell spanning all three and 37% of values were searched (benches/calibration.rs).
    brackets: Vec<[u32; 2]>,
}

/// A bucket where two cells end within it and its neighbours: [`CellCdf::inverse`] searches there.
const NO_CELL: u32 = u32::MAX;

/// Buckets of [`CellCdf::brackets`]: eight per cell, so that only cells holding less than 3/8 of the mean
/// mass end near another's end, but no more than 2^18 (2 MiB) unless the CDF has more cells than that
/// (then one per cell, as many as the guide).
fn bracket_buckets(cells: usize) -> usize {
    (cells * 8).min(1 << 18).max(cells)
}

impl CellCdf {
    /// `None` when the counts are all zero.
    pub fn from_counts(counts: &[u64]) -> Option<Self> {
        // Sums of counts below 2^53 are exact in f64: the same CDF as integer sums would give.
        Self::from_masses(counts.iter().map(|&count| count as f64))
    }

    /// The CDF of non-negative `weights` on equal cells; `None` when they sum to zero.
    pub fn from_weights(weights: &[f64]) -> Option<Self> {
        Self::from_masses(weights.iter().copied())
    }

    fn from_masses(masses: impl ExactSizeIterator<Item = f64> + Clone) -> Option<Self> {
        let total: f64 = masses.clone().sum();
        if total <= 0.0 {
            return None;
        }
        let mut running = 0.0;
        let mut cumulative = Vec::with_capacity(masses.len() + 1);
        cumulative.push(0.0);
        for mass in masses {
            running += mass;
            cumulative.push((running / total).min(1.0));
        }
        *cumulative.last_mut().expect("one edge at least") = 1.0;
        Some(Self::with_cumulative(cumulative))
    }

    /// The CDF with these cumulative shares ([`CellCdf::cumulative`], of a saved release): `None` unless they
    /// start at 0, end at 1, never decrease and mark 1 to 2^32 − 1 cells.
    pub fn from_cumulative(cumulative: Vec<f64>) -> Option<Self> {
        let valid = cumulative.len() >= 2
            && u32::try_from(cumulative.len() - 1).is_ok()
            && cumulative[0] == 0.0
            && cumulative.last() == Some(&1.0)
            && cumulative.windows(2).all(|pair| pair[0] <= pair[1]);
        valid.then(|| Self::with_cumulative(cumulative))
    }

    /// cumulative[j]: the share of the mass in cells 0..j, all the CDF is (the rest is lookup tables made from it).
    pub fn cumulative(&self) -> &[f64] {
        &self.cumulative
    }

    /// F(x) = x: the CDF of one cell.
    pub fn uniform() -> Self {
        Self::with_cumulative(vec![0.0, 1.0])
    }

    fn with_cumulative(cumulative: Vec<f64>) -> Self {
        let cells = cumulative.len() - 1;
        assert!(u32::try_from(cells).is_ok(), "{cells} cells in a CDF");
        let mut guide = Vec::with_capacity(cells + 1);
        let mut cell = 0;
        for bucket in 0..=cells {
            let start = bucket as f64 / cells as f64;
            while cell < cells && cumulative[cell + 1] < start {
                cell += 1;
            }
            guide.push(cell as u32);
        }
        // Bucket b's u lie in [b, b + 1)/buckets up to rounding, so buckets b − 1 to b + 1 bound them. The
        // cell a search over every cell finds for u is the first one holding mass whose upper cumulative
        // reaches u: the first such cell for the range's start when u is at most its upper cumulative,
        // else the next cell holding mass, when its upper cumulative reaches past the range.
        let holds_mass = |cell: usize| cumulative[cell + 1] > cumulative[cell];
        let next_with_mass = |mut cell: usize| {
            while cell < cells && !holds_mass(cell) {
                cell += 1;
            }
            cell
        };
        let buckets = bracket_buckets(cells);
        let mut first = next_with_mass(0);
        let brackets = (0..=buckets)
            .map(|bucket| {
                let (start, end) = ((bucket as f64 - 1.0) / buckets as f64, (bucket as f64 + 2.0) / buckets as f64);
                while first < cells && cumulative[first + 1] < start {
                    first = next_with_mass(first + 1);
                }
                if first == cells {
                    return [NO_CELL; 2];
                }
                if cumulative[first + 1] >= end {
                    return [first as u32; 2];
                }
                let next = next_with_mass(first + 1);
                if next < cells && cumulative[next + 1] >= end { [first as u32, next as u32] } else { [NO_CELL; 2] }
            })
            .collect();
        CellCdf { cumulative, guide, brackets }
    }

    /// weight·F + (1 − weight)·U, U the uniform CDF on [0,1]: still a CDF of counts on the same cells.
    pub fn mixed_with_uniform(&self, weight: f64) -> Self {
        let cells = self.cells() as f64;
        Self::with_cumulative(
            self.cumulative
                .iter()
                .enumerate()
                .map(|(edge, &value)| weight * value + (1.0 - weight) * edge as f64 / cells)
                .collect(),
        )
    }

    /// The CDF moved so that at each edge of `grid` equal cells of [0, 1] next to a cell across which F
    /// rises by at least `min_rise`/`steps`, it takes its value there rounded to a multiple of 1/`steps`
    /// (`grid` and `steps` powers of two); linearly in F between the grid's edges. Cutting F's values
    /// into `steps` equal cells then cuts x at each such edge. Where F rises by at least 1/`steps` across
    /// every grid cell (half of it or more the uniform CDF, and `steps` ≥ 2·`grid`), no grid cell
    /// collapses to one value.
    pub fn aligned(&self, grid: usize, steps: usize, min_rise: f64) -> Self {
        debug_assert!(grid.is_power_of_two() && steps.is_power_of_two());
        // F's cells refined to the grid where it is coarser: the same piecewise-linear function.
        let cells = self.cells().max(grid);
        let edge_values: Vec<f64> = if cells == self.cells() {
            self.cumulative.clone()
        } else {
            (0..=cells).map(|edge| self.value(edge as f64 / cells as f64)).collect()
        };
        let per_grid_cell = cells / grid;
        let at_grid: Vec<f64> = edge_values.iter().step_by(per_grid_cell).copied().collect();
        let rises = |edge: usize| {
            let rise = |cell: usize| (at_grid[cell + 1] - at_grid[cell]) * steps as f64 >= min_rise;
            (edge > 0 && rise(edge - 1)) || (edge < grid && rise(edge))
        };
        let mut moved_to: Vec<f64> = (0..=grid)
            .map(|edge| if rises(edge) { (at_grid[edge] * steps as f64).round() / steps as f64 } else { at_grid[edge] })
            .collect();
        // Rounding up next to a cell F barely crosses could pass the next edge.
        for edge in 1..=grid {
            moved_to[edge] = moved_to[edge].max(moved_to[edge - 1]);
        }
        let mut cumulative: Vec<f64> = edge_values[..cells]
            .chunks_exact(per_grid_cell)
            .enumerate()
            .flat_map(|(grid_cell, inside)| {
                let (low, high) = (at_grid[grid_cell], at_grid[grid_cell + 1]);
                let (to_low, to_high) = (moved_to[grid_cell], moved_to[grid_cell + 1]);
                inside.iter().map(move |&value| {
                    if high > low { to_low + (to_high - to_low) * (value - low) / (high - low) } else { to_low }
                })
            })
            .collect();
        cumulative.push(1.0);
        Self::with_cumulative(cumulative)
    }

    /// The number of equal cells of [0, 1] the CDF is linear within.
    pub fn cells(&self) -> usize {
        self.cumulative.len() - 1
    }

    /// F(x) for x in [0,1].
    #[inline]
    pub fn value(&self, x: f64) -> f64 {
        self.value_in_cell(x).0
    }

    /// F(x), and F at the end of the cell of F's that x lies in.
    #[inline]
    pub fn value_in_cell(&self, x: f64) -> (f64, f64) {
        let scaled = x.clamp(0.0, 1.0) * self.cells() as f64;
        let cell = (scaled as usize).min(self.cells() - 1);
        let (low, high) = (self.cumulative[cell], self.cumulative[cell + 1]);
        (low + (scaled - cell as f64) * (high - low), high)
    }

    /// F⁻¹(u) for u in [0,1]: inside the cell where F reaches u, linearly (cells with no mass are skipped).
    #[inline]
    pub fn inverse(&self, u: f64) -> f64 {
        let u = u.clamp(0.0, 1.0);
        let cell = self.picked_cell(u, self.brackets[self.bracket_of(u)]);
        self.within_cell(cell, u)
    }

    /// [`Self::inverse`] of every value of `values`, in place and to the bit, in blocks of [`INVERSE_BLOCK`]:
    /// each step's table reads for the block are independent of one another (the brackets, then the
    /// cumulative share that picks between two cells, then the cell's edges), so that a large CDF's
    /// cache misses overlap instead of following one value's chain of reads after another's.
    pub fn inverse_all(&self, values: &mut [f64]) {
        let mut picks = [[0u32; 2]; INVERSE_BLOCK];
        let mut cells = [0usize; INVERSE_BLOCK];
        for block in values.chunks_mut(INVERSE_BLOCK) {
            for (value, pick) in block.iter_mut().zip(&mut picks) {
                *value = value.clamp(0.0, 1.0);
                *pick = self.brackets[self.bracket_of(*value)];
            }
            for ((&u, &pick), cell) in block.iter().zip(&picks).zip(&mut cells) {
                *cell = self.picked_cell(u, pick);
            }
            for (value, &cell) in block.iter_mut().zip(&cells) {
                *value = self.within_cell(cell, *value);
            }
        }
    }

    /// The bracket bucket of u (in [0,1]).
    #[inline]
    fn bracket_of(&self, u: f64) -> usize {
        (u * (self.brackets.len() - 1) as f64) as usize
    }

    /// The first cell whose upper cumulative reaches u (in [0,1]) and that holds mass, from u's `bracket`:
    /// one of the two bracketing u's bucket where there are two, else it lies between the guides of the
    /// buckets around u's (one bucket of margin each side, so rounding in u·cells cannot put it outside), and
    /// is found there as a search over every cell would find it.
    #[inline]
    fn picked_cell(&self, u: f64, bracket: [u32; 2]) -> usize {
        let cells = self.cells();
        match bracket {
            [NO_CELL, _] => {
                let bucket = (u * cells as f64) as usize;
                let from = self.guide[bucket.saturating_sub(1)] as usize;
                let to = self.guide[(bucket + 2).min(cells)] as usize;
                let searched = self.cumulative[from + 1..=to.min(cells - 1) + 1].partition_point(|&high| high < u);
                let cell = (from + searched).min(cells - 1);
                (cell..cells).find(|&j| self.cumulative[j + 1] > self.cumulative[j]).unwrap_or(cell)
            }
            // As arithmetic, not a branch: which of the two it is depends on u alone, and mispredicting
            // that cost more than the rest of the lookup.
            [first, next] => {
                let (first, next) = (first as usize, next as usize);
                first + usize::from(self.cumulative[first + 1] < u) * (next - first)
            }
        }
    }

    /// F⁻¹(u) for u (in [0,1]) in `cell`: linearly inside it.
    #[inline]
    fn within_cell(&self, cell: usize, u: f64) -> f64 {
        let cells = self.cells();
        let (low, high) = (self.cumulative[cell], self.cumulative[cell + 1]);
        let within = if high > low { ((u - low) / (high - low)).clamp(0.0, 1.0) } else { 0.5 };
        // Multiplying by 2^−k is dividing by 2^k to the bit, and spares a division's latency per value.
        if cells.is_power_of_two() {
            (cell as f64 + within) * (1.0 / cells as f64)
        } else {
            (cell as f64 + within) / cells as f64
        }
    }
}

/// Values per block of [`CellCdf::inverse_all`].
const INVERSE_BLOCK: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cdf_and_its_inverse_agree_where_there_is_mass() {
        let cdf = CellCdf::from_counts(&[2, 0, 1, 1]).unwrap();
        assert_eq!(cdf.value(0.0), 0.0);
        assert_eq!(cdf.value(0.125), 0.25);
        assert_eq!(cdf.value(0.25), 0.5);
        assert_eq!(cdf.value(0.4), 0.5, "no mass in the second cell");
        assert_eq!(cdf.value(1.0), 1.0);
        for x in [0.01, 0.2, 0.55, 0.7, 0.99] {
            assert!((cdf.inverse(cdf.value(x)) - x).abs() < 1e-12, "{x}");
        }
        // u = 1/2 is reached at the end of the first cell; the inverse skips the empty one.
        assert_eq!(cdf.inverse(0.5), 0.25);
        assert_eq!(cdf.inverse(0.5 + 1e-9), 0.5 + 1e-9);
        assert!(CellCdf::from_counts(&[0, 0]).is_none());
    }

    #[test]
    fn weights_give_the_cdf_their_counts_give() {
        let counts = [3u64, 0, 7, 1, 0, 5];
        let weights: Vec<f64> = counts.iter().map(|&count| count as f64 * 0.25).collect();
        let from_counts = CellCdf::from_counts(&counts).unwrap();
        let from_weights = CellCdf::from_weights(&weights).unwrap();
        for (a, b) in from_counts.cumulative.iter().zip(&from_weights.cumulative) {
            assert!((a - b).abs() < 1e-15);
        }
        assert_eq!(from_weights.cumulative.last(), Some(&1.0));
        assert!(CellCdf::from_weights(&[0.0, 0.0]).is_none());
    }

    /// The inverse as a search over every cell: what the guided search must reproduce exactly.
    fn inverse_by_full_search(cdf: &CellCdf, u: f64) -> f64 {
        let u = u.clamp(0.0, 1.0);
        let cells = cdf.cells();
        let cell = cdf.cumulative[1..].partition_point(|&high| high < u).min(cells - 1);
        let cell = (cell..cells).find(|&j| cdf.cumulative[j + 1] > cdf.cumulative[j]).unwrap_or(cell);
        let (low, high) = (cdf.cumulative[cell], cdf.cumulative[cell + 1]);
        let within = if high > low { ((u - low) / (high - low)).clamp(0.0, 1.0) } else { 0.5 };
        (cell as f64 + within) / cells as f64
    }

    #[test]
    fn the_guided_inverse_is_the_full_search_to_the_bit() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        for case in 0..260 {
            // A few CDFs past 2^15 cells, where `brackets` has fewer than eight buckets per cell.
            let cells = if case % 50 < 48 { rng.random_range(1..300) } else { rng.random_range(40_000..70_000) };
            let counts: Vec<u64> = if case % 2 == 0 {
                // Runs of empty cells, single heavy cells and light ones.
                (0..cells)
                    .map(|_| match rng.random_range(0..4) {
                        0 | 1 => 0,
                        2 => rng.random_range(1..4),
                        _ => rng.random_range(1..10_000),
                    })
                    .collect()
            } else {
                // Cells of about the same mass (a noisy release of a flat column), where most buckets
                // hold one cell's end and the inverse picks between two cells.
                (0..cells).map(|_| rng.random_range(700..1300)).collect()
            };
            let Some(cdf) = CellCdf::from_counts(&counts) else { continue };
            for cdf in [cdf.clone(), cdf.mixed_with_uniform(0.3)] {
                let edges = cdf.cumulative.clone();
                let steps = (0..=1000).map(|step| step as f64 / 1000.0);
                let draws: Vec<f64> = (0..1000).map(|_| rng.random()).collect();
                let probes = steps.chain(draws).chain(edges.iter().copied());
                let probes: Vec<f64> = probes.chain([-0.5, 1.5, f64::NAN, 1e-300, 1.0 - 1e-16]).collect();
                let mut in_blocks = probes.clone();
                cdf.inverse_all(&mut in_blocks);
                for (&u, blocked) in probes.iter().zip(in_blocks) {
                    let (guided, full) = (cdf.inverse(u), inverse_by_full_search(&cdf, u));
                    assert!(guided.to_bits() == full.to_bits(), "case {case}, u = {u}: {guided} vs {full}");
                    assert!(blocked.to_bits() == full.to_bits(), "case {case}, u = {u}: {blocked} in blocks vs {full}");
                }
            }
        }
    }

    #[test]
    fn a_mixture_with_the_uniform_cdf_is_their_weighted_sum() {
        let cdf = CellCdf::from_counts(&[3, 0, 0, 1]).unwrap();
        let mixed = cdf.mixed_with_uniform(0.5);
        for x in [0.0, 0.1, 0.3, 0.5, 0.8, 1.0] {
            assert!((mixed.value(x) - (0.5 * cdf.value(x) + 0.5 * x)).abs() < 1e-15, "{x}");
        }
        assert_eq!(cdf.mixed_with_uniform(1.0), cdf);
        assert_eq!(cdf.mixed_with_uniform(0.0), CellCdf::from_counts(&[1, 1, 1, 1]).unwrap());
    }

    #[test]
    fn an_aligned_cdf_takes_whole_steps_at_the_edges_of_rising_grid_cells_and_moves_no_more_than_half_a_step() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(11);
        for case in 0..300 {
            let cells = 1usize << rng.random_range(0..12);
            let counts: Vec<u64> =
                (0..cells).map(|_| if rng.random_bool(0.5) { 0 } else { rng.random_range(1..1000) }).collect();
            let Some(cdf) = CellCdf::from_counts(&counts) else { continue };
            let cdf = cdf.mixed_with_uniform(0.5);
            let (grid, steps) = (1usize << rng.random_range(0..6), 1usize << rng.random_range(0..10));
            let min_rise = [0.0, 1.0, 4.0][case % 3];
            let aligned = cdf.aligned(grid, steps, min_rise);
            assert!(aligned.cumulative.windows(2).all(|pair| pair[0] <= pair[1]), "case {case}: not monotone");
            let at = |edge: usize| cdf.value(edge as f64 / grid as f64);
            let rises = |cell: usize| (at(cell + 1) - at(cell)) * steps as f64 >= min_rise;
            let mut last = 0.0;
            for edge in 0..=grid {
                let (value, moved) = (at(edge), aligned.value(edge as f64 / grid as f64));
                if (edge > 0 && rises(edge - 1)) || (edge < grid && rises(edge)) {
                    assert_eq!(moved * steps as f64, (moved * steps as f64).round(), "case {case}, edge {edge}");
                    assert!((value - moved).abs() <= 0.5 / steps as f64 + 1e-12, "case {case}, edge {edge}");
                } else {
                    assert!((value - moved).abs() < 1e-12, "case {case}, edge {edge} moved");
                }
                // The uniform half makes F rise by at least 1/(2·grid) ≥ 1/steps across a grid cell, and the
                // edges move by half a step at most.
                if edge > 0 && steps >= 2 * grid {
                    assert!(moved - last >= 0.5 / steps as f64 - 1e-12, "case {case}: grid cell {edge} collapsed");
                }
                last = moved;
            }
            // Between the edges it is linear in F: the values keep their order.
            for _ in 0..50 {
                let (a, b) = (rng.random::<f64>(), rng.random::<f64>());
                if cdf.value(a) < cdf.value(b) {
                    assert!(aligned.value(a) <= aligned.value(b), "case {case}");
                }
            }
        }
        assert_eq!(CellCdf::uniform().aligned(32, 64, 0.0).value(0.3), 0.3, "the uniform CDF is aligned already");
    }
}
