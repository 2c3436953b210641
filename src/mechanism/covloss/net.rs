//! The data-independent α-net of the unit ball of R^t: N_t = B_2^t ∩ (α/√t)·Z^t (paper §3.4), its
//! points c_j = (α/√t)·a_j enumerated in lexicographic order of the integer vectors a_j, and the
//! nearest net point of a projected row.
//!
//! Nearest point: round z/h coordinate-wise (h = α/√t). If the rounded vector is in the ball it is the
//! nearest point of the whole lattice, hence of the net. Otherwise (near the sphere) the truncation of
//! z/h toward zero is a net point (it only shrinks |coordinates|), and the nearest net point lies in the
//! box of lattice vectors within that distance of z: a local search over that box, ties to the
//! smallest index. The rule depends only on the point and the (released) subspace, as privacy needs.

use crate::error::{Error, Result};

/// Lattice-box cells the index table may use.
const MAX_INDEX_TABLE: usize = 1 << 24;

#[derive(Clone, Debug)]
pub struct LatticeNet {
    pub t: usize,
    #[cfg(test)]
    pub alpha: f64,
    /// h = α/√t, the lattice step.
    step: f64,
    /// M = ⌊√t/α⌋: every net vector lies in [−M, M]^t.
    bound: i64,
    points: Vec<Vec<i64>>,
    /// Net index of each vector of [−M, M]^t (u32::MAX when outside the ball), odometer order.
    index: Vec<u32>,
}

impl LatticeNet {
    /// The net for dimension `t` and mesh `alpha` ∈ (0, 1]; t = 0 gives the single point 0.
    pub fn new(t: usize, alpha: f64) -> Result<Self> {
        if !(alpha > 0.0 && alpha <= 1.0) {
            return Err(Error::bad_input(format!("the net's alpha must be in (0, 1], got {alpha}")));
        }
        let step = if t == 0 { 1.0 } else { alpha / (t as f64).sqrt() };
        let radius_squared = t as f64 / (alpha * alpha);
        let bound = radius_squared.sqrt().floor() as i64;
        let side = (2 * bound + 1) as usize;
        let table = side
            .checked_pow(t as u32)
            .filter(|&cells| cells <= MAX_INDEX_TABLE)
            .ok_or_else(|| {
                Error::bad_input(format!(
                    "the lattice net for t = {t}, alpha = {alpha} is too large to index; lower --covloss-t or raise --covloss-alpha"
                ))
            })?;
        let mut points = Vec::new();
        let mut index = vec![u32::MAX; table];
        let mut vector = vec![-bound; t];
        for slot in index.iter_mut() {
            let norm: i64 = vector.iter().map(|a| a * a).sum();
            if norm as f64 <= radius_squared {
                *slot = points.len() as u32;
                points.push(vector.clone());
            }
            // Odometer: the last coordinate moves fastest (lexicographic order).
            for coordinate in vector.iter_mut().rev() {
                if *coordinate < bound {
                    *coordinate += 1;
                    break;
                }
                *coordinate = -bound;
            }
        }
        Ok(LatticeNet {
            t,
            #[cfg(test)]
            alpha,
            step,
            bound,
            points,
            index,
        })
    }

    /// s, the number of net points (cells).
    // A net is never empty (it holds the ball's centre), so it has no `is_empty`.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// The net point c_j ∈ R^t.
    #[cfg(test)]
    pub fn point(&self, j: usize) -> Vec<f64> {
        self.points[j].iter().map(|&a| a as f64 * self.step).collect()
    }

    fn index_of(&self, vector: &[i64]) -> Option<u32> {
        let side = 2 * self.bound + 1;
        let mut position = 0i64;
        for &a in vector {
            if a.abs() > self.bound {
                return None;
            }
            position = position * side + a + self.bound;
        }
        let index = self.index[position as usize];
        (index != u32::MAX).then_some(index)
    }

    fn distance_squared(&self, vector: &[i64], z: &[f64]) -> f64 {
        vector
            .iter()
            .zip(z)
            .map(|(&a, &z)| {
                let gap = a as f64 * self.step - z;
                gap * gap
            })
            .sum()
    }

    /// The index of the net point nearest to `z` (ties to the smallest index).
    pub fn nearest(&self, z: &[f64]) -> u32 {
        if self.t == 0 {
            return 0;
        }
        let rounded: Vec<i64> = z.iter().map(|&z| (z / self.step).round() as i64).collect();
        if let Some(index) = self.index_of(&rounded) {
            return index;
        }
        self.search(z)
    }

    /// The local search near the sphere: the box of lattice vectors within the distance of a net point
    /// known to be close (the truncation toward zero, or the origin).
    fn search(&self, z: &[f64]) -> u32 {
        let truncated: Vec<i64> = z.iter().map(|&z| (z / self.step).trunc() as i64).collect();
        let start = match self.index_of(&truncated) {
            Some(index) => index,
            None => self.index_of(&vec![0; self.t]).expect("the origin is a net point"),
        };
        let reach = self.distance_squared(&self.points[start as usize], z).sqrt() / self.step;
        let low: Vec<i64> = z
            .iter()
            .map(|&z| ((z / self.step - reach).ceil() as i64).max(-self.bound))
            .collect();
        let high: Vec<i64> = z
            .iter()
            .map(|&z| ((z / self.step + reach).floor() as i64).min(self.bound))
            .collect();
        let mut best = (self.distance_squared(&self.points[start as usize], z), start);
        let mut vector = low.clone();
        if low.iter().zip(&high).any(|(l, h)| l > h) {
            return best.1;
        }
        loop {
            if let Some(index) = self.index_of(&vector) {
                let candidate = (self.distance_squared(&vector, z), index);
                if candidate < best {
                    best = candidate;
                }
            }
            let mut advanced = false;
            for axis in (0..self.t).rev() {
                if vector[axis] < high[axis] {
                    vector[axis] += 1;
                    advanced = true;
                    break;
                }
                vector[axis] = low[axis];
            }
            if !advanced {
                return best.1;
            }
        }
    }
}

/// The paper's DP net parameters from the public n (Algorithm 2 step 3, (5.14) [RECONSTRUCTED]):
/// α = (ln n)^{−1/4}, t = ⌊ln √n / ln(7/α)⌋, clamped to p.
pub fn private_net_parameters(rows: u64, bits: usize) -> (f64, usize) {
    let log_n = (rows.max(3) as f64).ln();
    let alpha = log_n.powf(-0.25);
    let t = ((0.5 * log_n) / (7.0 / alpha).ln()).floor().max(0.0) as usize;
    (alpha, t.min(bits))
}

/// The paper's anonymity net parameters from a cell budget k' (eq. 3.5): α = (ln ln k'/ln k')^{1/4},
/// t = ⌊ln k' / ln(7/α)⌋, clamped to p; k' < 3 leaves no room for a net (t = 0, one cell).
pub fn anonymity_net_parameters(cell_budget: u64, bits: usize) -> (f64, usize) {
    if cell_budget < 3 {
        return (1.0, 0);
    }
    let log_k = (cell_budget as f64).ln();
    let alpha = (log_k.ln() / log_k).powf(0.25);
    let t = (log_k / (7.0 / alpha).ln()).floor().max(0.0) as usize;
    (alpha, t.min(bits))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn brute_force(net: &LatticeNet, z: &[f64]) -> u32 {
        (0..net.len())
            .map(|j| {
                let c = net.point(j);
                let d: f64 = c.iter().zip(z).map(|(c, z)| (c - z) * (c - z)).sum();
                (d, j as u32)
            })
            .min_by(|a, b| a.partial_cmp(b).unwrap())
            .unwrap()
            .1
    }

    #[test]
    fn the_paper_sizes_come_out_of_the_formulas() {
        // The note's §3.5 table (natural log): n → (t, s).
        for (n, t, s) in [(1e3f64, 1, 3), (1e5, 2, 21), (1e7, 3, 179), (1e10, 4, 1897)] {
            let (alpha, got_t) = private_net_parameters(n as u64, 100);
            assert_eq!(got_t, t, "t at n = {n}");
            let net = LatticeNet::new(got_t, alpha).unwrap();
            assert_eq!(net.len(), s, "s at n = {n}");
            assert!((net.len() as f64) <= (7.0 / alpha).powi(t as i32), "s ≤ (7/α)^t");
            assert!((net.len() as f64) <= n.sqrt(), "s ≤ √n");
        }
        // Algorithm 1 with k' = ⌊√k⌋ vs k (§3.5): k = 1000 → (31: t = 1, s = 3) and (1000: t = 3, s = 57).
        let (alpha, t) = anonymity_net_parameters(31, 100);
        assert_eq!((t, LatticeNet::new(t, alpha).unwrap().len()), (1, 3));
        let (alpha, t) = anonymity_net_parameters(1000, 100);
        assert_eq!((t, LatticeNet::new(t, alpha).unwrap().len()), (3, 57));
        assert_eq!(anonymity_net_parameters(2, 100), (1.0, 0));
    }

    #[test]
    fn every_point_of_the_ball_is_within_alpha_of_its_nearest_net_point_and_search_is_exact() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        for (t, alpha) in [(1, 0.6), (2, 0.54), (3, 0.5), (4, 0.45)] {
            let net = LatticeNet::new(t, alpha).unwrap();
            for _ in 0..3000 {
                // Points in the ball, many close to the sphere where the rounded vector leaves it.
                let mut z: Vec<f64> = (0..t).map(|_| rng.random::<f64>() * 2.0 - 1.0).collect();
                let norm = z.iter().map(|v| v * v).sum::<f64>().sqrt();
                let radius = if rng.random::<f64>() < 0.5 { 1.0 - rng.random::<f64>() * 0.05 } else { rng.random::<f64>() };
                for v in &mut z {
                    *v *= radius / norm.max(1e-12);
                }
                let nearest = net.nearest(&z);
                assert_eq!(nearest, brute_force(&net, &z), "t = {t}, z = {z:?}");
                let c = net.point(nearest as usize);
                let gap: f64 = c.iter().zip(&z).map(|(c, z)| (c - z) * (c - z)).sum::<f64>().sqrt();
                assert!(gap < alpha, "Lemma 3.6's net property: {gap} ≥ α = {alpha}");
                assert!(c.iter().map(|c| c * c).sum::<f64>() <= 1.0 + 1e-12, "net points are in the ball");
            }
        }
        let single = LatticeNet::new(0, 0.5).unwrap();
        assert_eq!((single.len(), single.nearest(&[])), (1, 0));
    }
}
