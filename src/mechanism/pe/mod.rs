//! Private Evolution (PE), as analysed in "Private Evolution Converges" (Gonzalez, Fanti, Ramdas;
//! docs/mechanisms/pe.md). Starting from public points S_0, each of T steps makes variations V_t of
//! S_{t−1}, counts for every variation how many private rows have it as their nearest neighbour,
//! privatises the counts, post-processes them into weights and resamples n_s points S_t from V_t.
//!
//! Privacy (replace only, n public): only the counts read the data. One replaced row moves one vote, so
//! the count vector has ℓ2 sensitivity √2; the exact discrete Gaussian N_Z(0, σ²) on every count is
//! (1/σ²)-zCDP per step (Canonne–Kamath–Steinke), the T steps compose to ρ = T/σ², converted once to
//! (ε, δ) (`privacy::zcdp`). σ² is calibrated so that ρ is the largest that (ε, δ) allows. The
//! laplace-threshold variant instead spends (ε/T, δ/T) per step by basic composition (see
//! [`plan::LaplaceStep`]). Everything else (variations, thresholds, the D_BL projection, resampling)
//! is post-processing.

pub mod args;
pub mod histogram;
pub mod nearest;
#[cfg(feature = "gpu")]
pub mod nearest_gpu;
pub mod options;
pub mod plan;
pub mod report;
pub mod search;
pub mod variation;

use std::path::PathBuf;

use serde::Serialize;

pub use options::PeOptions;
pub use plan::PePlan;
pub use variation::PeDomain;

use crate::sampler::{allocate_rows, Permutation, RowGenerator, RowOrder};

/// What turns the noisy histogram into sampling weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum PeVariant {
    /// Algorithm 2, the analysed one: the noisy histogram projected onto the simplex in D_BL (an exact
    /// min-cost flow over every pair of candidates; up to 1500 candidates per step).
    Projection,
    /// Algorithm 3, practical PE: keep the noisy counts ≥ H·n and renormalise (H = 0: the paper's
    /// simulated "PE").
    Threshold,
    /// App. E: Laplace noise on the positive counts only, kept above a stability threshold.
    LaplaceThreshold,
}

/// Where the initial points S_0 come from (Random_API). Never from the private data.
#[derive(Clone, Debug, PartialEq)]
pub enum PeInit {
    /// n_s points uniform on the domain.
    Uniform,
    /// n_s copies of the domain's centre (the paper's Figure 2 "origin" start).
    Centre,
    /// n_s rows drawn with replacement from a PUBLIC table with the same columns, normalised with the
    /// run's bounds. The guarantee holds only if that table is independent of the private data.
    File(PathBuf),
}

impl std::str::FromStr for PeInit {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        Ok(match text {
            "uniform" => PeInit::Uniform,
            "centre" | "center" => PeInit::Centre,
            "" => return Err("--pe-init needs uniform, centre or a Parquet file".to_string()),
            path => PeInit::File(PathBuf::from(path)),
        })
    }
}

impl PeInit {
    pub fn describe(&self) -> String {
        match self {
            PeInit::Uniform => "uniform on the domain".to_string(),
            PeInit::Centre => "n_s copies of the domain's centre".to_string(),
            PeInit::File(path) => format!(
                "n_s rows drawn with replacement from the public table {} (declared public by the user)",
                path.display()
            ),
        }
    }
}

/// The released synthetic points S_T (normalised units), each drawn once; the default output is the
/// public n rows spread evenly over them (`allocate_rows`), `--rows N` spreads N. Row r is a copy of the point
/// that holds row π(r) of the point-ordered table, π a keyed permutation in random order (the copies of a point
/// would otherwise come one after another).
pub struct PointRows {
    dims: usize,
    points: Vec<f64>,
    /// offsets[i] = rows written before point i, with the total at the end.
    offsets: Vec<u64>,
    /// `None` in point order.
    permutation: Option<Permutation>,
}

impl PointRows {
    pub fn new(dims: usize, points: &[f64], rows: u64, order: RowOrder, seed: u64) -> Self {
        let count = points.len() / dims;
        let per_point = allocate_rows(&vec![1; count], rows);
        let mut offsets = Vec::with_capacity(count + 1);
        let mut total = 0;
        offsets.push(0);
        for rows in per_point {
            total += rows;
            offsets.push(total);
        }
        let permutation = match order {
            RowOrder::Random => Some(Permutation::of_rows(total, seed, 0)),
            RowOrder::Cells => None,
        };
        PointRows { dims, points: points.to_vec(), offsets, permutation }
    }
}

impl RowGenerator for PointRows {
    fn total_rows(&self) -> u64 {
        *self.offsets.last().expect("offsets start at 0")
    }

    fn sample_rows(&self, start: u64, rows: usize, columns: &mut [Vec<f64>]) {
        for column in columns.iter_mut() {
            column.clear();
        }
        // The point of row r is the last i with offsets[i] ≤ r.
        let point_of = |row: u64| self.offsets.partition_point(|&offset| offset <= row) - 1;
        let mut point = point_of(start);
        for row in start..start + rows as u64 {
            match &self.permutation {
                Some(permutation) => point = point_of(permutation.apply(row)),
                None => {
                    while self.offsets[point + 1] <= row {
                        point += 1;
                    }
                }
            }
            for (axis, column) in columns.iter_mut().enumerate() {
                column.push(self.points[point * self.dims + axis]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn point_rows_spread_the_rows_over_the_points() {
        let mut in_order = Vec::new();
        for order in [RowOrder::Cells, RowOrder::Random] {
            let rows = PointRows::new(2, &[0.1, 0.2, 0.3, 0.4, 0.5, 0.6], 7, order, 5);
            assert_eq!(rows.total_rows(), 7);
            let mut columns = vec![Vec::new(), Vec::new()];
            let mut all = Vec::new();
            for start in 0..7 {
                rows.sample_rows(start, 1, &mut columns);
                all.push((columns[0][0], columns[1][0]));
            }
            rows.sample_rows(0, 7, &mut columns);
            let batch: Vec<(f64, f64)> = columns[0].iter().copied().zip(columns[1].iter().copied()).collect();
            assert_eq!(all, batch, "{order:?}");
            for point in [(0.1, 0.2), (0.3, 0.4), (0.5, 0.6)] {
                let copies = all.iter().filter(|&&row| row == point).count();
                assert!(copies == 2 || copies == 3, "{order:?}");
            }
            in_order.push(all);
        }
        // Random order: the same rows, not in point order.
        assert_ne!(in_order[0], in_order[1]);
        in_order[1].sort_by(|a, b| a.partial_cmp(b).unwrap());
        assert_eq!(in_order[0], in_order[1]);
    }
}
