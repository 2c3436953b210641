//! Summary statistics of a table and the errors between two: means, covariances and k-way marginals on a
//! grid (SPEC §7). All in normalised units on [0,1]^d.
//!
//! Sums are taken over fixed chunks of rows on the current rayon pool and the partial sums combined in
//! order, so results are bit-identical whatever the thread count.

use rayon::prelude::*;
use serde::Serialize;

/// Rows per chunk of the parallel sums.
pub const SUM_CHUNK_ROWS: usize = 1 << 14;

/// Grid side of the k-way marginals, for k = 1, 2, 3 (64, 32², 16³ cells).
pub const MARGINAL_SIDES: [usize; 3] = [64, 32, 16];

/// Grid side of every order in the equal-grid comparison ([`MarginalComparison::equal_grid`]). It divides
/// each of [`MARGINAL_SIDES`], so those histograms are coarsened to it instead of counted again.
pub const EQUAL_GRID_MARGINAL_SIDE: usize = 16;

/// The highest order of marginals compared.
pub const MAX_MARGINAL_ORDER: usize = 3;

/// Most (column subsets × rows of both tables) one order of marginals may cost; higher orders are
/// left out beyond it (at d = 100 with 10^5 rows: the 1- and 2-way marginals, not the 161 700 3-way ones).
pub const MARGINAL_WORK_LIMIT: usize = 1 << 31;

/// Means and covariance matrix (population, divided by n) of points in [0,1]^d.
#[derive(Clone, Debug, PartialEq)]
pub struct Moments {
    pub mean: Vec<f64>,
    /// Row-major d × d.
    pub covariance: Vec<f64>,
}

impl Moments {
    /// Two passes (mean, then centred cross-products), which keeps the cancellation of the one-pass
    /// formula E[xy] − E[x]E[y] out of the result.
    pub fn of(points: &[f64], dims: usize) -> Moments {
        let rows = points.len() / dims;
        let sums = chunked_sum(points, dims, dims, |row, out| {
            for (sum, &x) in out.iter_mut().zip(row) {
                *sum += x;
            }
        });
        let mean: Vec<f64> = sums.iter().map(|sum| sum / rows as f64).collect();
        let products = chunked_sum(points, dims, dims * dims, |row, out| {
            for i in 0..dims {
                let centred = row[i] - mean[i];
                for j in i..dims {
                    out[i * dims + j] += centred * (row[j] - mean[j]);
                }
            }
        });
        let mut covariance = vec![0.0; dims * dims];
        for i in 0..dims {
            for j in i..dims {
                let value = products[i * dims + j] / rows as f64;
                covariance[i * dims + j] = value;
                covariance[j * dims + i] = value;
            }
        }
        Moments { mean, covariance }
    }

    /// Pearson correlation matrix (row-major d × d): 1 on the diagonal, 0 beside a constant column (whose
    /// correlation is undefined).
    pub fn correlation(&self) -> Vec<f64> {
        let dims = self.mean.len();
        let std = self.std();
        let mut correlation = vec![0.0; dims * dims];
        for i in 0..dims {
            for j in 0..dims {
                correlation[i * dims + j] = if i == j {
                    1.0
                } else if std[i] > 0.0 && std[j] > 0.0 {
                    (self.covariance[i * dims + j] / (std[i] * std[j])).clamp(-1.0, 1.0)
                } else {
                    0.0
                };
            }
        }
        correlation
    }

    /// Standard deviation of each coordinate.
    pub fn std(&self) -> Vec<f64> {
        let dims = self.mean.len();
        (0..dims).map(|k| self.covariance[k * dims + k].max(0.0).sqrt()).collect()
    }
}

/// Spearman's rank correlation matrix (row-major d × d): the Pearson correlation of each column's
/// mid-ranks ([`mid_ranks`]). Unlike Pearson's it does not change under a strictly increasing change of a
/// column, so a long tail cannot carry it: it says whether the bulk of the rows keeps its dependence.
pub fn rank_correlation(points: &[f64], dims: usize) -> Vec<f64> {
    Moments::of(&mid_ranks(points, dims), dims).correlation()
}

/// Each value replaced by its rank in its column, 0-based; tied values share the mean of their ranks, so
/// the result does not depend on how a sort orders them.
fn mid_ranks(points: &[f64], dims: usize) -> Vec<f64> {
    let rows = points.len() / dims;
    let mut ranks = vec![0.0; points.len()];
    // (value, row) pairs sort faster than row numbers read through the strided table.
    let mut sorted: Vec<(f64, usize)> = Vec::with_capacity(rows);
    for axis in 0..dims {
        sorted.clear();
        sorted.extend(points.iter().skip(axis).step_by(dims).copied().zip(0..));
        sorted.par_sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        let mut first = 0;
        for ties in sorted.chunk_by(|a, b| a.0 == b.0) {
            let mid_rank = first as f64 + (ties.len() - 1) as f64 / 2.0;
            for &(_, row) in ties {
                ranks[row * dims + axis] = mid_rank;
            }
            first += ties.len();
        }
    }
    ranks
}

/// Σ over rows of `add(row, accumulator)`, an accumulator of `width` values, in fixed chunks.
fn chunked_sum(points: &[f64], dims: usize, width: usize, add: impl Fn(&[f64], &mut [f64]) + Sync) -> Vec<f64> {
    let partials: Vec<Vec<f64>> = points
        .par_chunks(SUM_CHUNK_ROWS * dims)
        .map(|chunk| {
            let mut out = vec![0.0; width];
            for row in chunk.chunks_exact(dims) {
                add(row, &mut out);
            }
            out
        })
        .collect();
    let mut total = vec![0.0; width];
    for partial in partials {
        for (sum, value) in total.iter_mut().zip(partial) {
            *sum += value;
        }
    }
    total
}

/// max |a − b| and the ℓ2 (Frobenius) norm of a − b.
pub fn difference_norms(a: &[f64], b: &[f64]) -> (f64, f64) {
    let (max, squares) = a.iter().zip(b).fold((0.0f64, 0.0), |(max, squares), (x, y)| {
        let d = x - y;
        (max.max(d.abs()), squares + d * d)
    });
    (max, squares.sqrt())
}

/// Total-variation errors of all k-column marginals for one k.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MarginalErrors {
    pub k: usize,
    /// Grid side per axis: each marginal has side^k cells.
    pub side: usize,
    /// max over column subsets of ½ Σ_cells |p_real − p_synth|.
    pub max_tv: f64,
    pub mean_tv: f64,
    /// Number of column subsets (d choose k).
    pub count: usize,
    /// Columns of the subset with the largest TV.
    pub worst_columns: Vec<String>,
}

/// The cell of x on a grid of `side` cells over [0, 1] (1.0 in the top cell).
#[inline]
pub fn grid_index(x: f64, side: usize) -> usize {
    ((x * side as f64) as usize).min(side - 1)
}

/// Histogram (counts) of the marginal of the columns `subset` on a grid of `side` per axis; cell index
/// row-major with the first column of the subset most significant.
pub fn marginal_histogram(points: &[f64], dims: usize, subset: &[usize], side: usize) -> Vec<u64> {
    let cells = side.pow(subset.len() as u32);
    let partials: Vec<Vec<u64>> = points
        .par_chunks(SUM_CHUNK_ROWS * dims)
        .map(|chunk| {
            let mut hist = vec![0u64; cells];
            for row in chunk.chunks_exact(dims) {
                let cell = subset.iter().fold(0, |index, &k| index * side + grid_index(row[k], side));
                hist[cell] += 1;
            }
            hist
        })
        .collect();
    let mut hist = vec![0u64; cells];
    for partial in partials {
        for (total, count) in hist.iter_mut().zip(partial) {
            *total += count;
        }
    }
    hist
}

/// ½ Σ |a/A − b/B| between two histograms, each normalised by its own total.
pub fn total_variation(a: &[u64], b: &[u64]) -> f64 {
    let (total_a, total_b) = (a.iter().sum::<u64>().max(1) as f64, b.iter().sum::<u64>().max(1) as f64);
    0.5 * a.iter().zip(b).map(|(&x, &y)| (x as f64 / total_a - y as f64 / total_b).abs()).sum::<f64>()
}

/// Every k-subset of 0..dims in lexicographic order.
pub fn subsets(dims: usize, k: usize) -> Vec<Vec<usize>> {
    fn extend(start: usize, dims: usize, k: usize, current: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if current.len() == k {
            out.push(current.clone());
            return;
        }
        for next in start..dims {
            current.push(next);
            extend(next + 1, dims, k, current, out);
            current.pop();
        }
    }
    let mut out = Vec::new();
    extend(0, dims, k, &mut Vec::with_capacity(k), &mut out);
    out
}

/// The k-way marginal errors twice: on the grids of [`MARGINAL_SIDES`] (finer for small k) and all on
/// one grid of side [`EQUAL_GRID_MARGINAL_SIDE`]. Only the second is comparable across k: TV grows with
/// the number of cells, and on one grid the TV of a k-way marginal is at least that of each of its
/// (k − 1)-way marginals (marginalising never increases TV).
#[derive(Clone, Debug, PartialEq)]
pub struct MarginalComparison {
    pub fine: Vec<MarginalErrors>,
    pub equal_grid: Vec<MarginalErrors>,
}

/// Cell counts of a k-dimensional histogram of side `side` (row-major) summed into blocks of `factor`
/// cells per axis.
pub fn coarsen(hist: &[u64], side: usize, k: usize, factor: usize) -> Vec<u64> {
    let coarse_side = side / factor;
    let mut out = vec![0u64; coarse_side.pow(k as u32)];
    for (cell, &count) in hist.iter().enumerate() {
        let (mut rest, mut coarse, mut scale) = (cell, 0, 1);
        for _ in 0..k {
            coarse += (rest % side) / factor * scale;
            rest /= side;
            scale *= coarse_side;
        }
        out[coarse] += count;
    }
    out
}

/// Summarises one order's TVs (one per subset, in `subsets` order).
fn summarise(k: usize, side: usize, tvs: &[f64], all: &[Vec<usize>], names: &[String]) -> MarginalErrors {
    let (worst, max_tv) =
        tvs.iter().enumerate().fold((0, 0.0f64), |best, (i, &tv)| if tv > best.1 { (i, tv) } else { best });
    MarginalErrors {
        k,
        side,
        max_tv,
        mean_tv: tvs.iter().sum::<f64>() / tvs.len() as f64,
        count: tvs.len(),
        worst_columns: all[worst].iter().map(|&k| names[k].clone()).collect(),
    }
}

/// TV errors of the k-way marginals for k = 1..=min(d, [`MAX_MARGINAL_ORDER`]) while an order costs
/// at most [`MARGINAL_WORK_LIMIT`], on both grids of [`MarginalComparison`]. `names` are the column names, in
/// coordinate order. Subsets run in parallel on the current rayon pool.
pub fn marginal_errors(real: &[f64], synth: &[f64], dims: usize, names: &[String]) -> MarginalComparison {
    let rows = (real.len() + synth.len()) / dims.max(1);
    let (fine, equal_grid) = (1..=dims.min(MAX_MARGINAL_ORDER))
        .map(|k| (k, subsets(dims, k)))
        .take_while(|(_, all)| all.len().saturating_mul(rows) <= MARGINAL_WORK_LIMIT)
        .map(|(k, all)| {
            let side = MARGINAL_SIDES[k - 1];
            let factor = side / EQUAL_GRID_MARGINAL_SIDE;
            let (fine_tvs, equal_tvs): (Vec<f64>, Vec<f64>) = all
                .par_iter()
                .map(|subset| {
                    let (a, b) =
                        (marginal_histogram(real, dims, subset, side), marginal_histogram(synth, dims, subset, side));
                    (
                        total_variation(&a, &b),
                        total_variation(&coarsen(&a, side, k, factor), &coarsen(&b, side, k, factor)),
                    )
                })
                .unzip();
            (
                summarise(k, side, &fine_tvs, &all, names),
                summarise(k, EQUAL_GRID_MARGINAL_SIDE, &equal_tvs, &all, names),
            )
        })
        .unzip();
    MarginalComparison { fine, equal_grid }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{case_rng, unit_points};

    #[test]
    fn covariance_matches_the_naive_two_pass_formula_across_chunks() {
        let mut rng = case_rng(11);
        for (n, dims) in [(1, 1), (7, 3), (SUM_CHUNK_ROWS * 2 + 5, 2)] {
            let points = unit_points(&mut rng, n, dims);
            let moments = Moments::of(&points, dims);
            let row = |r: usize| &points[r * dims..(r + 1) * dims];
            for i in 0..dims {
                let mean_i = (0..n).map(|r| row(r)[i]).sum::<f64>() / n as f64;
                assert!((moments.mean[i] - mean_i).abs() < 1e-12);
                for j in 0..dims {
                    let mean_j = (0..n).map(|r| row(r)[j]).sum::<f64>() / n as f64;
                    let naive = (0..n).map(|r| (row(r)[i] - mean_i) * (row(r)[j] - mean_j)).sum::<f64>() / n as f64;
                    assert!((moments.covariance[i * dims + j] - naive).abs() < 1e-12, "n {n} ({i}, {j})");
                }
            }
        }
        // Known values: points (0,0), (1,1) have mean ½ and covariance ¼ everywhere.
        let moments = Moments::of(&[0.0, 0.0, 1.0, 1.0], 2);
        assert_eq!(moments.mean, vec![0.5, 0.5]);
        assert_eq!(moments.covariance, vec![0.25; 4]);
        assert_eq!(moments.std(), vec![0.5, 0.5]);
    }

    #[test]
    fn mid_ranks_count_the_values_below_and_share_ties() {
        let mut rng = case_rng(13);
        // unit_points puts a tenth of the values on 0 and on 1 (and some tables on a lattice): many ties.
        for (n, dims) in [(1, 1), (2, 2), (300, 3)] {
            let points = unit_points(&mut rng, n, dims);
            let ranks = mid_ranks(&points, dims);
            for axis in 0..dims {
                let column: Vec<f64> = points.iter().skip(axis).step_by(dims).copied().collect();
                for (row, &value) in column.iter().enumerate() {
                    let below = column.iter().filter(|&&other| other < value).count();
                    let tied = column.iter().filter(|&&other| other == value).count();
                    let expected = below as f64 + (tied - 1) as f64 / 2.0;
                    assert_eq!(ranks[row * dims + axis], expected, "n {n}, row {row}, axis {axis}");
                }
            }
        }
    }

    #[test]
    fn rank_correlation_ignores_increasing_changes_of_a_column_where_pearson_does_not() {
        // y follows x closely; x^6 keeps the order of x but bends it (a long tail, seen from Pearson).
        let mut rng = case_rng(14);
        let n = 2000;
        let noise = unit_points(&mut rng, n, 1);
        let mut points = Vec::with_capacity(2 * n);
        for (row, &e) in noise.iter().enumerate() {
            let x = (row as f64 + 0.5) / n as f64;
            points.extend([x, 0.8 * x + 0.2 * e]);
        }
        let bent: Vec<f64> = points.chunks_exact(2).flat_map(|row| [row[0].powi(6), row[1]]).collect();
        let (rank, rank_bent) = (rank_correlation(&points, 2), rank_correlation(&bent, 2));
        assert_eq!(rank, rank_bent);
        let (pearson, pearson_bent) = (Moments::of(&points, 2).correlation(), Moments::of(&bent, 2).correlation());
        assert!(pearson[1] - pearson_bent[1] > 0.1, "Pearson {} vs {}", pearson[1], pearson_bent[1]);
        // Known values: a column against itself reversed, and a constant column (0, as Pearson's).
        let reversed: Vec<f64> = (0..n).flat_map(|row| [row as f64, -(row as f64)]).collect();
        assert!((rank_correlation(&reversed, 2)[1] + 1.0).abs() < 1e-12);
        let constant: Vec<f64> = (0..n).flat_map(|row| [row as f64, 0.5]).collect();
        assert_eq!(rank_correlation(&constant, 2), vec![1.0, 0.0, 0.0, 1.0]);
    }

    #[test]
    fn marginal_tv_matches_brute_force_over_cells() {
        let mut rng = case_rng(12);
        let dims = 3;
        let (a, b) = (unit_points(&mut rng, 300, dims), unit_points(&mut rng, 170, dims));
        let names: Vec<String> = (0..dims).map(|k| format!("c{k}")).collect();
        let comparison = marginal_errors(&a, &b, dims, &names);
        let errors: Vec<&MarginalErrors> = comparison.fine.iter().chain(&comparison.equal_grid).collect();
        assert_eq!(errors.len(), 6);
        for error in errors {
            let side = error.side;
            let mut tvs = Vec::new();
            for subset in subsets(dims, error.k) {
                // Brute force: for every cell of the subset's grid, the share of rows of each table in it.
                let mut tv = 0.0;
                for cell in 0..side.pow(error.k as u32) {
                    let cell_of = |row: &[f64]| {
                        subset.iter().enumerate().all(|(position, &axis)| {
                            let index = cell / side.pow((error.k - 1 - position) as u32) % side;
                            let lo = index as f64 / side as f64;
                            let hi = (index + 1) as f64 / side as f64;
                            row[axis] >= lo && (row[axis] < hi || (index == side - 1 && row[axis] <= 1.0))
                        })
                    };
                    let share = |points: &[f64]| {
                        points.chunks_exact(dims).filter(|row| cell_of(row)).count() as f64
                            / (points.len() / dims) as f64
                    };
                    tv += (share(&a) - share(&b)).abs();
                }
                tvs.push(tv / 2.0);
            }
            let max = tvs.iter().copied().fold(0.0, f64::max);
            let mean = tvs.iter().sum::<f64>() / tvs.len() as f64;
            assert_eq!(error.count, tvs.len());
            assert!((error.max_tv - max).abs() < 1e-12, "k {}: {} vs {max}", error.k, error.max_tv);
            assert!((error.mean_tv - mean).abs() < 1e-12);
        }
        // Identical tables have zero error; disjoint supports have TV 1.
        let same = marginal_errors(&a, &a, dims, &names);
        assert!(same.fine.iter().chain(&same.equal_grid).all(|e| e.max_tv == 0.0));
        let tv = marginal_errors(&[0.0], &[1.0], 1, &names[..1]);
        assert_eq!((tv.fine[0].max_tv, tv.equal_grid[0].max_tv), (1.0, 1.0));
        // On one grid, TV cannot fall as k grows (each k-way marginal contains its sub-marginals).
        let equal = &comparison.equal_grid;
        assert!(equal.windows(2).all(|pair| pair[0].max_tv <= pair[1].max_tv + 1e-15));
        assert!(equal.iter().all(|e| e.side == EQUAL_GRID_MARGINAL_SIDE));
    }

    #[test]
    #[allow(clippy::identity_op)] // the cells summed, listed as they are, cell 0 too
    fn coarsening_sums_blocks_and_correlations_match_their_definition() {
        // side 4 → 2 in k = 2: cell (i, j) goes to (i / 2, j / 2).
        let hist: Vec<u64> = (0..16).collect();
        let coarse = coarsen(&hist, 4, 2, 2);
        assert_eq!(coarse, vec![0 + 1 + 4 + 5, 2 + 3 + 6 + 7, 8 + 9 + 12 + 13, 10 + 11 + 14 + 15]);
        assert_eq!(coarsen(&hist, 16, 1, 4), vec![6, 22, 38, 54]);
        // y = 1 − x: correlation −1; a constant column has correlation 0 with the others.
        let rows = [0.0, 1.0, 0.3, 1.0, 0.0, 0.3, 0.5, 0.5, 0.3];
        let correlation = Moments::of(&rows, 3).correlation();
        assert!((correlation[1] + 1.0).abs() < 1e-12);
        assert_eq!(&correlation[..], &[correlation[0], correlation[1], 0.0, correlation[1], 1.0, 0.0, 0.0, 0.0, 1.0]);
        assert_eq!(correlation[0], 1.0);
    }

    #[test]
    fn subsets_are_all_k_combinations() {
        assert_eq!(subsets(4, 2).len(), 6);
        assert_eq!(subsets(3, 3), vec![vec![0, 1, 2]]);
        assert_eq!(subsets(2, 1), vec![vec![0], vec![1]]);
    }
}
