//! Algorithm 1 (paper Thm 4.6; note §1.3, §1.7): (n/k)-anonymous synthetic Boolean data by spectral
//! microaggregation. NOT differentially private: every released centroid is the exact mean of at least
//! ⌊n/k⌋ input rows, nothing more.
//!
//! 1. S = (1/n) Σ x̃x̃ᵀ exactly (x̃ = x/√p: the rescaling the printed algorithm forgets, note §6 item 1);
//! 2. the spectral net partition with α, t from a cell budget k' (eq. 3.5): k' = ⌊√k⌋ as the proof needs
//!    (default), or k as printed (`--cells-from k`, which the note measured to do better);
//! 3. the equipartition by divide-and-merge: rows sorted by (cell, first projected coordinate, row), each
//!    cell cut into groups of g = ⌊n/k⌋, the residuals pooled in the same order and cut again; exactly k
//!    groups, each of exactly n/k rows when k divides n (otherwise the last one also takes the n mod k
//!    leftover rows, Remark 4.2);
//! 4. the centroids y_j = mean of group j, weights |I_j|/n (1/k each when k | n): the mean is kept exactly.

use serde::Serialize;

use super::moments::{second_moment, GroupSums, PairCounts};
use super::net::{anonymity_net_parameters, LatticeNet};
use super::partition::SpectralPartition;
use super::points::WeightedPoints;
use crate::encoding::read::BitRows;
use crate::error::{Error, Result};

/// Which cell budget the net is sized for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum CellsFrom {
    /// k' = ⌊√k⌋, as Theorem 4.1's proof needs (the merger bound stays small).
    SqrtK,
    /// k itself, as the printed Algorithm 1 says.
    K,
}

#[derive(Clone, Debug)]
pub struct MicroaggPlan {
    pub rows: u64,
    pub bits: usize,
    pub groups: u64,
    pub net: LatticeNet,
    pub parameters: MicroaggParameters,
}

/// What the run report says about a microagg release.
#[derive(Clone, Debug, Serialize)]
pub struct MicroaggParameters {
    pub rows: u64,
    pub bits: usize,
    pub k: u64,
    pub group_size: u64,
    pub anonymity: u64,
    pub cells_from: &'static str,
    pub cell_budget: u64,
    pub alpha: f64,
    pub t: usize,
    pub cells: usize,
    pub rules: &'static str,
    pub rounding: &'static str,
    /// Expected share of rows that the paper's independent per-bit rounding would have decoded (every
    /// one-hot block with exactly one bit), computed from the released points: the cost of that rounding
    /// which the one-category-per-block rule avoids. Set after the release.
    pub independent_rounding_decodable_rows: Option<f64>,
}

impl MicroaggPlan {
    pub fn new(rows: u64, bits: usize, groups: u64, cells_from: CellsFrom) -> Result<Self> {
        if groups < 1 || groups > rows {
            return Err(Error::bad_input(format!(
                "--k must be between 1 and the number of rows ({rows}), got {groups}"
            )));
        }
        let cell_budget = match cells_from {
            CellsFrom::SqrtK => (groups as f64).sqrt().floor() as u64,
            CellsFrom::K => groups,
        };
        let (alpha, t) = anonymity_net_parameters(cell_budget, bits);
        let net = LatticeNet::new(t, alpha)?;
        let group_size = rows / groups;
        let parameters = MicroaggParameters {
            rows,
            bits,
            k: groups,
            group_size,
            anonymity: group_size,
            cells_from: match cells_from {
                CellsFrom::SqrtK => "sqrt-k: k' = floor(sqrt(k)), as the proof of Thm 4.1 needs",
                CellsFrom::K => "k: k' = k, as the printed Algorithm 1",
            },
            cell_budget,
            alpha,
            t,
            cells: net.len(),
            rules: "alpha = (ln ln k'/ln k')^{1/4}, t = floor(ln k'/ln(7/alpha)) (t = 0 for k' < 3), at most p; \
                groups of floor(n/k) rows by divide-and-merge, the n mod k leftover rows in the last group",
            rounding: "uniform bootstrap over the groups (weights |I_j|/n), then Bernoulli per bit and one \
                category per one-hot block drawn in proportion to the block",
            independent_rounding_decodable_rows: None,
        };
        Ok(MicroaggPlan {
            rows,
            bits,
            groups,
            net,
            parameters,
        })
    }

    /// The release: group labels per row (per chunk), then the centroids. `exact` holds the pair counts
    /// of `data`.
    pub fn release(&self, data: &BitRows, exact: &PairCounts) -> Result<WeightedPoints> {
        let labels = self.groups_of(data, exact)?;
        let sums = GroupSums::of(data, &labels, self.groups as usize);
        Ok(centroids(&sums, self.rows))
    }

    /// Each row's group (per chunk, in row order).
    pub fn groups_of(&self, data: &BitRows, exact: &PairCounts) -> Result<Vec<Vec<u32>>> {
        if data.rows() != self.rows || data.bits != self.bits || exact.rows != self.rows || exact.bits != self.bits {
            return Err(Error::internal("microagg read another table than it planned for"));
        }
        let exact: Vec<i64> = exact.counts.iter().map(|&count| count as i64).collect();
        let moment = second_moment(&exact, self.bits, self.rows);
        let partition = SpectralPartition::new(&moment, self.bits, self.net.clone())?;
        let cells = partition.assign(data);
        let cell_of: Vec<u32> = cells.cells.concat();
        let lead: Vec<f64> = cells.lead.concat();
        let flat = equipartition(&cell_of, &lead, self.net.len(), self.groups as usize);
        let mut labels = Vec::with_capacity(data.chunks.len());
        let mut start = 0;
        for chunk in &data.chunks {
            labels.push(flat[start..start + chunk.rows].to_vec());
            start += chunk.rows;
        }
        Ok(labels)
    }
}

/// Divide and merge: each row's group among `groups`, from its cell and its sort key inside the cell.
pub fn equipartition(cell_of: &[u32], lead: &[f64], cells: usize, groups: usize) -> Vec<u32> {
    let rows = cell_of.len();
    let size = rows / groups;
    let mut by_cell: Vec<Vec<u32>> = vec![Vec::new(); cells];
    for (row, &cell) in cell_of.iter().enumerate() {
        by_cell[cell as usize].push(row as u32);
    }
    let mut full = Vec::with_capacity(rows);
    let mut pool = Vec::new();
    for members in &mut by_cell {
        members.sort_by(|&a, &b| lead[a as usize].total_cmp(&lead[b as usize]).then(a.cmp(&b)));
        let whole = members.len() / size * size;
        full.extend_from_slice(&members[..whole]);
        pool.extend_from_slice(&members[whole..]);
    }
    let mut labels = vec![0u32; rows];
    for (position, &row) in full.iter().chain(&pool).enumerate() {
        labels[row as usize] = (position / size).min(groups - 1) as u32;
    }
    labels
}

/// The group means and weights |I_j|/n.
pub fn centroids(sums: &GroupSums, rows: u64) -> WeightedPoints {
    let bits = sums.bits;
    let points = (0..sums.counts.len())
        .flat_map(|j| {
            let count = sums.counts[j].max(1) as f64;
            sums.sums[j * bits..(j + 1) * bits].iter().map(move |&sum| sum as f64 / count)
        })
        .collect();
    WeightedPoints {
        bits,
        weights: sums.counts.iter().map(|&count| count as f64 / rows as f64).collect(),
        points,
    }
}
