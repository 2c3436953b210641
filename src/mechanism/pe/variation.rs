//! Private Evolution's public APIs on the normalised domain (docs/mechanisms/pe.md): the initial points
//! (Random_API) and the variations of eq. (1) of the paper,
//!
//! Variation_API(z) = {z} ∪ { proj_Ω(z + N^{k,l}) : l = 1..L, k = 1, 2 },  N^{k,l} ~ N(0, σ_l² I),
//!
//! with σ_l = α·2^{l−1}/(√π·K_d), K_d = (√d + log 2)² + log 2 (the version the proof of Lemma D.1
//! needs; the paper's eq. (1) prints the root over π·K_d, see the notes). None of this reads the data:
//! the draws come from a xoshiro256++ stream of the run's post-processing seed.

use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use super::nearest::{snap_to_lattice, Metric};

/// The domain Ω in normalised units, with its metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum PeDomain {
    /// The cube [0,1]^d of the public bounds, with the ℓ∞ metric (dpsynth's metric elsewhere).
    Box,
    /// The ball inscribed in that cube (centre 1/2, radius 1/2), with the ℓ2 metric: the unit disc of
    /// the paper's simulations when the bounds are −1:1.
    Ball,
}

impl PeDomain {
    pub fn metric(self) -> Metric {
        match self {
            PeDomain::Box => Metric::Chebyshev,
            PeDomain::Ball => Metric::Euclidean,
        }
    }

    /// The diameter D in the domain's metric (normalised units): 1 for both.
    pub const DIAMETER: f64 = 1.0;

    /// The Euclidean projection proj_Ω, in place: clamping for the box, radial for the ball.
    pub fn project(self, point: &mut [f64]) {
        match self {
            PeDomain::Box => point.iter_mut().for_each(|x| *x = x.clamp(0.0, 1.0)),
            PeDomain::Ball => {
                let norm = point.iter().map(|x| (x - 0.5) * (x - 0.5)).sum::<f64>().sqrt();
                if norm > 0.5 {
                    let shrink = 0.5 / norm;
                    point.iter_mut().for_each(|x| *x = 0.5 + (*x - 0.5) * shrink);
                }
            }
        }
    }

    /// One point uniform on Ω.
    pub fn uniform_point(self, rng: &mut Xoshiro256PlusPlus, point: &mut [f64]) {
        match self {
            PeDomain::Box => point.iter_mut().for_each(|x| *x = rng.random::<f64>()),
            PeDomain::Ball => {
                // A uniform direction (normalised Gaussian) at radius ½·U^{1/d}.
                let mut norm = 0.0;
                while norm == 0.0 {
                    point.iter_mut().for_each(|x| *x = standard_normal(rng));
                    norm = point.iter().map(|x| x * x).sum::<f64>().sqrt();
                }
                let radius = 0.5 * rng.random::<f64>().powf(1.0 / point.len() as f64);
                point.iter_mut().for_each(|x| *x = 0.5 + *x / norm * radius);
            }
        }
    }
}

/// One standard normal draw (Box–Muller; post-processing, so floating point is fine).
pub fn standard_normal(rng: &mut Xoshiro256PlusPlus) -> f64 {
    let u = 1.0 - rng.random::<f64>(); // (0, 1]
    let v = rng.random::<f64>();
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

/// K_d = (√d + log 2)² + log 2 of Lemma D.1.
pub fn k_d(dims: usize) -> f64 {
    let ln2 = std::f64::consts::LN_2;
    ((dims as f64).sqrt() + ln2).powi(2) + ln2
}

/// σ_l = α·2^{l−1}/(√π·K_d), l = 1..=L.
pub fn variation_sigmas(alpha: f64, scales: u32, dims: usize) -> Vec<f64> {
    let denominator = std::f64::consts::PI.sqrt() * k_d(dims);
    (0..scales)
        .map(|l| alpha * f64::from(1u32 << l) / denominator)
        .collect()
}

/// Variation_API of every point of `points` (flat, `dims` per point), as one list: point i's 2L + 1
/// variations are entries i·(2L+1) .. (i+1)·(2L+1), the point itself first (duplicates kept: every
/// entry gets its own noisy count), each snapped to the nearest-neighbour search's lattice.
pub fn variations(
    domain: PeDomain,
    points: &[f64],
    dims: usize,
    sigmas: &[f64],
    rng: &mut Xoshiro256PlusPlus,
) -> Vec<f64> {
    let per_point = 2 * sigmas.len() + 1;
    let mut out = Vec::with_capacity(points.len() * per_point);
    let mut varied = vec![0.0; dims];
    for point in points.chunks_exact(dims) {
        out.extend_from_slice(point);
        for &sigma in sigmas {
            for _ in 0..2 {
                for (v, &x) in varied.iter_mut().zip(point) {
                    *v = x + sigma * standard_normal(rng);
                }
                domain.project(&mut varied);
                out.extend_from_slice(&varied);
            }
        }
    }
    // On the search's lattice (a shift of at most 2^−22 per coordinate): the CPU and GPU searches
    // then compute the same exact distances.
    out.iter_mut().for_each(|x| *x = snap_to_lattice(*x));
    out
}

/// The generator of one named use (`purpose`) at step `step` of the run's evolution seed.
pub fn step_rng(seed: u64, purpose: u64, step: u32) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(
        seed ^ purpose.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(step).rotate_left(32),
    )
}

/// `count` draws with replacement from the categorical law ∝ `weights` (not all zero) over the points
/// of `candidates`, returned as points (flat).
pub fn resample(
    candidates: &[f64],
    dims: usize,
    weights: &[f64],
    count: usize,
    rng: &mut Xoshiro256PlusPlus,
) -> Vec<f64> {
    let mut cumulative = Vec::with_capacity(weights.len());
    let mut total = 0.0;
    for &weight in weights {
        total += weight;
        cumulative.push(total);
    }
    let mut out = Vec::with_capacity(count * dims);
    for _ in 0..count {
        let target = rng.random::<f64>() * total;
        // The first entry whose cumulative weight exceeds the target (a zero weight is never picked).
        let picked = cumulative
            .partition_point(|&c| c <= target)
            .min(weights.len() - 1);
        out.extend_from_slice(&candidates[picked * dims..(picked + 1) * dims]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mechanism::pe::nearest::LATTICE_BITS;

    #[test]
    fn variations_contain_the_point_and_stay_in_the_domain() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        for domain in [PeDomain::Box, PeDomain::Ball] {
            let points = [0.5, 0.5, 0.8, 0.4, 0.3, 0.6];
            let sigmas = variation_sigmas(0.26, 3, 2);
            let out = variations(domain, &points, 2, &sigmas, &mut rng);
            assert_eq!(out.len(), 3 * 7 * 2);
            for (i, point) in points.chunks_exact(2).enumerate() {
                let snapped: Vec<f64> = point.iter().map(|&x| snap_to_lattice(x)).collect();
                assert_eq!(&out[i * 14..i * 14 + 2], &snapped[..]);
            }
            let lattice = f64::from(1u32 << LATTICE_BITS);
            assert!(out.iter().all(|x| (x * lattice).fract() == 0.0), "on the search's lattice");
            // Snapping moves a point by at most half a lattice step per coordinate.
            let slack = 0.5 / lattice * 2f64.sqrt();
            for v in out.chunks_exact(2) {
                match domain {
                    PeDomain::Box => assert!(v.iter().all(|x| (0.0..=1.0).contains(x))),
                    PeDomain::Ball => {
                        assert!(((v[0] - 0.5).powi(2) + (v[1] - 0.5).powi(2)).sqrt() <= 0.5 + slack)
                    }
                }
            }
        }
    }

    #[test]
    fn the_api_contracts_distances_as_lemma_d1_says() {
        // Def F.1 form of Lemma D.1 (d = 2, ℓ2 ball): for ‖z1 − z2‖ > α, E[min ‖z − z2‖] ≤ (1 − γ)‖z1 − z2‖
        // with γ = 1/(8π K_d); observed ≈ 0.95 in the notes.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(8);
        let (alpha, scales) = (0.065, 3);
        let sigmas = variation_sigmas(alpha, scales, 2);
        let gamma = 1.0 / (8.0 * std::f64::consts::PI * k_d(2));
        for (z1, z2) in [([0.5f64, 0.5], [0.8f64, 0.6]), ([0.2, 0.5], [0.6, 0.4]), ([0.5, 0.1], [0.5, 0.3])] {
            let distance = (z1[0] - z2[0]).hypot(z1[1] - z2[1]);
            assert!(distance > alpha);
            let draws = 4000;
            let mean: f64 = (0..draws)
                .map(|_| {
                    variations(PeDomain::Ball, &z1, 2, &sigmas, &mut rng)
                        .chunks_exact(2)
                        .map(|z| (z[0] - z2[0]).hypot(z[1] - z2[1]))
                        .fold(f64::INFINITY, f64::min)
                })
                .sum::<f64>()
                / draws as f64;
            assert!(mean <= (1.0 - gamma) * distance, "{mean} vs {distance}");
        }
    }

    #[test]
    fn uniform_points_cover_the_domain_and_resampling_skips_zero_weights() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
        let mut point = [0.0; 2];
        let inside = (0..10_000)
            .filter(|_| {
                PeDomain::Ball.uniform_point(&mut rng, &mut point);
                ((point[0] - 0.5).powi(2) + (point[1] - 0.5).powi(2)).sqrt() <= 0.25
            })
            .count();
        // A quarter of the disc's area lies within half its radius.
        assert!((inside as f64 / 10_000.0 - 0.25).abs() < 0.02, "{inside}");
        let candidates = [0.1, 0.2, 0.3];
        let drawn = resample(&candidates, 1, &[0.0, 2.0, 0.0], 50, &mut rng);
        assert!(drawn.iter().all(|&x| x == 0.2));
    }
}
