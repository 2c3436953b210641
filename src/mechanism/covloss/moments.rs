//! Exact integer statistics of the encoded rows, from their bit planes:
//!
//! - the second moment's counts C_ab = #{rows with bits a and b set} (a ≤ b), by AND + popcount over 64
//!   rows per word, O(n p²/64) word operations, parallel over chunks (exact integers, so identical for
//!   any thread count or order);
//! - per-row projections z_i = Uᵀ x_i / √p onto a subspace (the partition's coordinates);
//! - per-cell row counts and bit sums (the microaggregation's numerators).

use rayon::prelude::*;

use super::points::WeightedPoints;
use super::SumOverRanks;
use crate::encoding::read::{BitChunk, BitRows};

/// The upper triangle (a ≤ b, diagonal included) of XᵀX for 0/1 rows, packed row by row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PairCounts {
    pub bits: usize,
    pub rows: u64,
    pub counts: Vec<u64>,
}

impl PairCounts {
    /// Position of (a, b), a ≤ b, in `counts`.
    pub fn index(bits: usize, a: usize, b: usize) -> usize {
        debug_assert!(a <= b && b < bits);
        a * bits - a * (a + 1) / 2 + b
    }

    #[cfg(test)]
    pub fn at(&self, a: usize, b: usize) -> u64 {
        let (a, b) = if a <= b { (a, b) } else { (b, a) };
        self.counts[Self::index(self.bits, a, b)]
    }

    /// These counts, of the rows at hand, made the whole table's (rows included) by `sum_over_ranks`.
    pub fn summed_with(mut self, sum_over_ranks: SumOverRanks) -> Self {
        self.counts.push(self.rows);
        sum_over_ranks(&mut self.counts);
        self.rows = self.counts.pop().unwrap_or_default();
        self
    }

    fn zeros(bits: usize) -> Self {
        PairCounts {
            bits,
            rows: 0,
            counts: vec![0; bits * (bits + 1) / 2],
        }
    }

    fn add(mut self, other: PairCounts) -> Self {
        self.rows += other.rows;
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts) {
            *mine += theirs;
        }
        self
    }
}

/// C_ab over every row: AND + popcount on the bit planes, chunks in parallel.
pub fn pair_counts(rows: &BitRows) -> PairCounts {
    let bits = rows.bits;
    rows.chunks
        .par_iter()
        .map(|chunk| chunk_pair_counts(chunk, bits))
        .reduce(|| PairCounts::zeros(bits), PairCounts::add)
}

fn chunk_pair_counts(chunk: &BitChunk, bits: usize) -> PairCounts {
    let mut counts = PairCounts::zeros(bits);
    counts.rows = chunk.rows as u64;
    for a in 0..bits {
        let plane_a = chunk.plane(a);
        for b in a..bits {
            let together: u32 = plane_a
                .iter()
                .zip(chunk.plane(b))
                .map(|(x, y)| (x & y).count_ones())
                .sum();
            counts.counts[PairCounts::index(bits, a, b)] += u64::from(together);
        }
    }
    counts
}

/// The rescaled second moment S = (1/n) Σ x̃ x̃ᵀ, x̃ = x/√p, from counts C + noise (row-major p×p).
pub fn second_moment(counts: &[i64], bits: usize, rows: u64) -> Vec<f64> {
    let scale = 1.0 / (rows as f64 * bits as f64);
    let mut matrix = vec![0.0; bits * bits];
    for a in 0..bits {
        for b in a..bits {
            let value = counts[PairCounts::index(bits, a, b)] as f64 * scale;
            matrix[a * bits + b] = value;
            matrix[b * bits + a] = value;
        }
    }
    matrix
}

/// The covariance loss ‖S − Σ_j w_j ỹ_j ỹ_jᵀ‖_F (rescaled units, x̃ = x/√p, so both sides are
/// (1/p)-scaled second moments): what the weighted points miss of the data's exact second moment S,
/// from its pair counts `exact`. Owner-only: it depends on the data.
pub fn covariance_loss(exact: &PairCounts, points: &WeightedPoints) -> f64 {
    let bits = exact.bits;
    let counts: Vec<i64> = exact.counts.iter().map(|&count| count as i64).collect();
    let data = second_moment(&counts, bits, exact.rows);
    let released = points.second_moment();
    data.iter()
        .zip(&released)
        .map(|(s, r)| (s - r / bits as f64).powi(2))
        .sum::<f64>()
        .sqrt()
}

/// z_i = Uᵀ x_i / √p for every row of `chunk` (`rows × t`, row-major), with U given p×t row-major.
pub fn project_chunk(chunk: &BitChunk, bits: usize, basis: &[f64], t: usize) -> Vec<f64> {
    let mut projected = vec![0.0; chunk.rows * t];
    if t == 0 {
        return projected;
    }
    let scale = 1.0 / (bits as f64).sqrt();
    for bit in 0..bits {
        let direction: Vec<f64> = basis[bit * t..(bit + 1) * t].iter().map(|u| u * scale).collect();
        for (word_index, &word) in chunk.plane(bit).iter().enumerate() {
            let mut word = word;
            while word != 0 {
                let row = word_index * 64 + word.trailing_zeros() as usize;
                word &= word - 1;
                for (z, u) in projected[row * t..(row + 1) * t].iter_mut().zip(&direction) {
                    *z += u;
                }
            }
        }
    }
    projected
}

/// Row counts and bit sums per group: `counts[g]`, `sums[g * bits + bit]`, for rows labelled `groups`
/// (in row order across the chunks).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSums {
    pub bits: usize,
    pub counts: Vec<u64>,
    pub sums: Vec<u64>,
}

impl GroupSums {
    pub fn of(rows: &BitRows, groups: &[Vec<u32>], group_count: usize) -> GroupSums {
        let bits = rows.bits;
        let zeros = || GroupSums {
            bits,
            counts: vec![0; group_count],
            sums: vec![0; group_count * bits],
        };
        rows.chunks
            .par_iter()
            .zip(groups)
            .map(|(chunk, labels)| {
                let mut part = zeros();
                for &group in labels {
                    part.counts[group as usize] += 1;
                }
                for bit in 0..bits {
                    for (word_index, &word) in chunk.plane(bit).iter().enumerate() {
                        let mut word = word;
                        while word != 0 {
                            let row = word_index * 64 + word.trailing_zeros() as usize;
                            word &= word - 1;
                            part.sums[labels[row] as usize * bits + bit] += 1;
                        }
                    }
                }
                part
            })
            .reduce(zeros, |mut total, part| {
                for (mine, theirs) in total.counts.iter_mut().zip(part.counts) {
                    *mine += theirs;
                }
                for (mine, theirs) in total.sums.iter_mut().zip(part.sums) {
                    *mine += theirs;
                }
                total
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{bit_rows, case_rng};

    #[test]
    fn popcount_pair_counts_equal_the_naive_sums_for_any_chunking() {
        let bits = 70; // more than one word of bits per row, and chunks that end mid-word
        let data = bit_rows(&mut case_rng(1), 333, bits, 0.3);
        let naive = |a: usize, b: usize| data.iter().filter(|row| row[a] == 1 && row[b] == 1).count() as u64;
        for chunk_rows in [1, 64, 100, 333] {
            let counts = pair_counts(&BitRows::from_rows(bits, &data, chunk_rows));
            assert_eq!(counts.rows, 333);
            for a in 0..bits {
                for b in a..bits {
                    assert_eq!(counts.at(a, b), naive(a, b), "({a}, {b}) at chunks of {chunk_rows}");
                }
            }
        }
    }

    #[test]
    fn projections_and_group_sums_match_the_rows() {
        let bits = 5;
        let data = bit_rows(&mut case_rng(2), 130, bits, 0.3);
        let rows = BitRows::from_rows(bits, &data, 64);
        let basis: Vec<f64> = (0..bits * 2).map(|i| (i as f64 * 0.37).sin()).collect();
        let mut offset = 0;
        let mut labels = Vec::new();
        for chunk in &rows.chunks {
            let z = project_chunk(chunk, bits, &basis, 2);
            for row in 0..chunk.rows {
                for k in 0..2 {
                    let expected: f64 = (0..bits)
                        .map(|bit| f64::from(data[offset + row][bit]) * basis[bit * 2 + k])
                        .sum::<f64>()
                        / (bits as f64).sqrt();
                    assert!((z[row * 2 + k] - expected).abs() < 1e-12);
                }
            }
            labels.push((0..chunk.rows).map(|row| ((offset + row) % 3) as u32).collect::<Vec<_>>());
            offset += chunk.rows;
        }
        let sums = GroupSums::of(&rows, &labels, 3);
        for group in 0..3 {
            let members: Vec<&Vec<u8>> = data.iter().enumerate().filter(|(i, _)| i % 3 == group).map(|(_, r)| r).collect();
            assert_eq!(sums.counts[group], members.len() as u64);
            for bit in 0..bits {
                let expected: u64 = members.iter().map(|row| u64::from(row[bit])).sum();
                assert_eq!(sums.sums[group * bits + bit], expected);
            }
        }
    }
}
