//! The privatised nearest-neighbour histogram of one Private Evolution step and its post-processing
//! into sampling weights (docs/mechanisms/pe.md):
//!
//! - noise: the exact discrete Gaussian on every integer count, zeros and duplicate candidates included
//!   ([`gaussian_counts`]), or, for the laplace-threshold variant, the exact discrete Laplace on the
//!   positive counts only ([`laplace_threshold_weights`], the stability histogram of App. E);
//! - `threshold` (Algorithm 3): keep the noisy counts ≥ H·n (and > 0) and renormalise;
//! - `projection` (Algorithm 2): the probability vector nearest to the noisy one in D_BL, an exact
//!   min-cost flow ([`project_bounded_lipschitz`]).
//!
//! Noise draws come from the run's ChaCha streams, keyed by (step, chunk of candidates), each chunk
//! noised in parallel: the output does not depend on the thread count.

use rayon::prelude::*;

use super::nearest::Metric;
use crate::error::{Error, Result};
use crate::noise::discrete_gaussian::sample_discrete_gaussian;
use crate::noise::discrete_laplace::{sample_discrete_laplace, RationalScale};
use crate::privacy::streams::NOISE_CHUNK_CELLS;
use crate::privacy::{NoiseKey, NoiseStream};
use crate::transport::{
    solve_min_cost_flow_with, Algorithm, FlowNetwork, INFINITE_CAPACITY,
};

/// Bits of a stream chunk id that number the candidates' chunks; the step goes above them.
const CHUNK_BITS: u32 = 24;

/// The stream chunk of candidate chunk `chunk` at step `step`.
fn chunk_id(step: u32, chunk: usize) -> u64 {
    u64::from(step) << CHUNK_BITS | chunk as u64
}

/// counts[i] + N_Z(0, variance) for every i, zeros included.
pub fn gaussian_counts(counts: &[u64], variance: RationalScale, key: &NoiseKey, step: u32) -> Vec<i64> {
    let mut noisy = vec![0i64; counts.len()];
    noisy
        .par_chunks_mut(NOISE_CHUNK_CELLS)
        .zip(counts.par_chunks(NOISE_CHUNK_CELLS))
        .enumerate()
        .for_each(|(chunk, (noisy, counts))| {
            let mut rng = key.stream(NoiseStream::PeGaussianCounts, chunk_id(step, chunk));
            for (out, &count) in noisy.iter_mut().zip(counts) {
                *out = count as i64 + sample_discrete_gaussian(&mut rng, variance);
            }
        });
    noisy
}

/// Algorithm 3's post-processing: the noisy counts that are positive and ≥ `threshold_count` (H·n),
/// others 0; renormalising is left to the sampler. All zero when nothing survives.
pub fn threshold_weights(noisy: &[i64], threshold_count: f64) -> Vec<f64> {
    noisy
        .iter()
        .map(|&count| {
            let count = count as f64;
            if count > 0.0 && count >= threshold_count {
                count
            } else {
                0.0
            }
        })
        .collect()
}

/// The stability histogram (App. E): for each positive count c, c + Lap_Z(scale) kept if it reaches
/// `threshold_count`; zero counts stay zero and draw no noise. All zero when nothing survives.
pub fn laplace_threshold_weights(
    counts: &[u64],
    scale: RationalScale,
    threshold_count: u64,
    key: &NoiseKey,
    step: u32,
) -> Vec<f64> {
    let mut weights = vec![0.0; counts.len()];
    weights
        .par_chunks_mut(NOISE_CHUNK_CELLS)
        .zip(counts.par_chunks(NOISE_CHUNK_CELLS))
        .enumerate()
        .for_each(|(chunk, (weights, counts))| {
            let mut rng = key.stream(NoiseStream::PeLaplaceCounts, chunk_id(step, chunk));
            for (out, &count) in weights.iter_mut().zip(counts) {
                if count > 0 {
                    let noisy = count as i64 + sample_discrete_laplace(&mut rng, scale);
                    if noisy >= threshold_count as i64 {
                        *out = noisy as f64;
                    }
                }
            }
        });
    weights
}

/// Costs of the projection's network: a distance of 1 (the diameter) is this many units. Rounding the
/// distances to 2^−20 makes the flow's minimiser optimal to within n·2^−21 per unit of mass moved.
pub const PROJECTION_COST_UNIT: f64 = (1u64 << 20) as f64;

/// The largest candidate set the projection accepts: its network has m² arcs (every pair of candidates),
/// m = 1500 is 2.25·10^6 arcs, about 0.3 GB and seconds of network simplex per step.
pub const MAX_PROJECTION_CANDIDATES: usize = 1500;

/// The result of one D_BL projection.
pub struct BoundedLipschitzProjection {
    /// Integer masses on the candidates, summing to `mass`.
    pub masses: Vec<u64>,
    /// The optimal D_BL(noisy/mass, masses/mass), in the metric's units (rounded costs).
    pub distance: f64,
}

/// Algorithm 2, step 6: the probability vector w (as integer masses summing to `mass` = n) minimising
/// D_BL(noisy/n, w/n) over the candidates, by the min-cost flow of the notes (§2.5 d): node i supplies
/// noisy[i]; arcs i→j cost ρ(V_i, V_j); a bank node R with supply n − Σ noisy, arcs i↔R cost diam(Ω);
/// a sink P with demand n and free arcs i→P; the flow into P is w. The network matrix is totally
/// unimodular and the supplies integral, so the optimal w is integral.
pub fn project_bounded_lipschitz(
    metric: Metric,
    candidates: &[f64],
    dims: usize,
    noisy: &[i64],
    mass: u64,
    diameter: f64,
) -> Result<BoundedLipschitzProjection> {
    let m = noisy.len();
    if m > MAX_PROJECTION_CANDIDATES {
        return Err(Error::bad_input(format!(
            "--pe-variant projection: {m} candidates per step exceed the dense D_BL projection's limit \
             of {MAX_PROJECTION_CANDIDATES} (m^2 arcs); give fewer --pe-samples, or use --pe-variant threshold"
        )));
    }
    let mass_i64 =
        i64::try_from(mass).map_err(|_| Error::bad_input(format!("n = {mass} is too large")))?;
    let total: i128 = noisy.iter().map(|&c| i128::from(c)).sum();
    let bank_supply = i64::try_from(i128::from(mass_i64) - total)
        .map_err(|_| Error::internal("pe projection: the noisy counts overflow"))?;
    let mut net = FlowNetwork::with_capacity(m + 2, m * m + 2 * m);
    let nodes: Vec<_> = noisy.iter().map(|&c| net.add_node(c)).collect();
    let sink = net.add_node(-mass_i64);
    let bank = net.add_node(bank_supply);
    let first_sink_arc = net.arc_count();
    for &node in &nodes {
        net.add_arc(node, sink, INFINITE_CAPACITY, 0);
    }
    let bank_cost = (diameter * PROJECTION_COST_UNIT).round() as i64;
    for &node in &nodes {
        net.add_arc(node, bank, INFINITE_CAPACITY, bank_cost);
        net.add_arc(bank, node, INFINITE_CAPACITY, bank_cost);
    }
    for (i, a) in candidates.chunks_exact(dims).enumerate() {
        for (j, b) in candidates.chunks_exact(dims).enumerate() {
            if i != j {
                let cost = (metric.distance(metric.key(a, b)) * PROJECTION_COST_UNIT).round() as i64;
                net.add_arc(nodes[i], nodes[j], INFINITE_CAPACITY, cost);
            }
        }
    }
    let solution = solve_min_cost_flow_with(&net, Algorithm::NetworkSimplex)
        .map_err(|error| Error::internal(format!("pe projection: {error}")))?;
    let masses: Vec<u64> = solution.flows[first_sink_arc..first_sink_arc + m]
        .iter()
        .map(|&flow| flow as u64)
        .collect();
    Ok(BoundedLipschitzProjection {
        masses,
        distance: solution.cost as f64 / (PROJECTION_COST_UNIT * mass as f64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use microlp::{ComparisonOp, OptimizationDirection, Problem};
    use rand::{RngExt, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// The LP of the notes (§2.5 d), dense, in frequencies: minimise Σ_{i≠j} ρ_ij π_ij + D Σ (a_i + b_i)
    /// s.t. Σ_j π_ij − Σ_j π_ji + a_i − b_i + w_i = μ̃_i, Σ w_i = 1, all ≥ 0. Returns the optimum.
    fn dense_lp(metric: Metric, points: &[f64], dims: usize, noisy: &[f64], diameter: f64) -> f64 {
        let m = noisy.len();
        let mut lp = Problem::new(OptimizationDirection::Minimize);
        let mut rows: Vec<Vec<(microlp::Variable, f64)>> = vec![Vec::new(); m];
        for i in 0..m {
            for j in (0..m).filter(|&j| j != i) {
                let a = &points[i * dims..(i + 1) * dims];
                let b = &points[j * dims..(j + 1) * dims];
                let pi = lp.add_var(metric.distance(metric.key(a, b)), (0.0, f64::INFINITY));
                rows[i].push((pi, 1.0));
                rows[j].push((pi, -1.0));
            }
        }
        let mut all_w = Vec::new();
        for (i, row) in rows.iter_mut().enumerate() {
            let a = lp.add_var(diameter, (0.0, f64::INFINITY));
            let b = lp.add_var(diameter, (0.0, f64::INFINITY));
            let w = lp.add_var(0.0, (0.0, f64::INFINITY));
            row.extend([(a, 1.0), (b, -1.0), (w, 1.0)]);
            lp.add_constraint(&row[..], ComparisonOp::Eq, noisy[i]);
            all_w.push((w, 1.0));
        }
        lp.add_constraint(&all_w[..], ComparisonOp::Eq, 1.0);
        lp.solve().unwrap().into_solution().unwrap().objective()
    }

    #[test]
    fn the_flow_optimum_equals_the_dense_lp() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(17);
        for metric in [Metric::Chebyshev, Metric::Euclidean] {
            for m in [1usize, 2, 3, 5, 8, 12] {
                for dims in [1usize, 2] {
                    let points: Vec<f64> = (0..m * dims).map(|_| rng.random::<f64>()).collect();
                    let mass = 50u64;
                    let noisy: Vec<i64> = (0..m).map(|_| rng.random_range(-20..40)).collect();
                    let projection =
                        project_bounded_lipschitz(metric, &points, dims, &noisy, mass, 1.0).unwrap();
                    assert_eq!(projection.masses.iter().sum::<u64>(), mass);
                    let frequencies: Vec<f64> =
                        noisy.iter().map(|&c| c as f64 / mass as f64).collect();
                    let lp = dense_lp(metric, &points, dims, &frequencies, 1.0);
                    // Costs are rounded to 2^−20 per unit distance.
                    assert!(
                        (projection.distance - lp).abs() <= 1e-5 * (1.0 + lp),
                        "{metric:?} m={m} d={dims}: flow {} vs LP {lp}",
                        projection.distance
                    );
                }
            }
        }
    }

    #[test]
    fn a_probability_vector_projects_to_itself() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        let points: Vec<f64> = (0..20).map(|_| rng.random::<f64>()).collect();
        let counts: Vec<i64> = vec![3, 0, 7, 1, 0, 9, 2, 0, 0, 8];
        let mass = counts.iter().sum::<i64>() as u64;
        let projection =
            project_bounded_lipschitz(Metric::Euclidean, &points, 2, &counts, mass, 1.0).unwrap();
        assert_eq!(projection.distance, 0.0);
        let expected: Vec<u64> = counts.iter().map(|&c| c as u64).collect();
        assert_eq!(projection.masses, expected);
    }

    #[test]
    fn too_many_candidates_are_refused_by_name() {
        let m = MAX_PROJECTION_CANDIDATES + 1;
        let error = project_bounded_lipschitz(Metric::Chebyshev, &vec![0.5; m], 1, &vec![1; m], 10, 1.0)
            .err()
            .unwrap();
        assert!(error.to_string().contains("--pe-variant threshold"), "{error}");
    }

    #[test]
    fn thresholds_keep_what_reaches_them_and_may_keep_nothing() {
        assert_eq!(threshold_weights(&[-3, 0, 2, 5, 1], 0.0), vec![0.0, 0.0, 2.0, 5.0, 1.0]);
        assert_eq!(threshold_weights(&[-3, 0, 2, 5, 1], 2.0), vec![0.0, 0.0, 2.0, 5.0, 0.0]);
        assert!(threshold_weights(&[-3, 0, -1], 0.0).iter().all(|&w| w == 0.0));
        let key = NoiseKey::from_user_seed(1);
        let scale = RationalScale::new(2, 1).unwrap();
        // Zero counts never survive; a count far below the threshold essentially never does.
        let weights = laplace_threshold_weights(&[0, 0, 1000, 1, 0], scale, 30, &key, 1);
        assert_eq!(weights[0], 0.0);
        assert_eq!(weights[1], 0.0);
        assert_eq!(weights[4], 0.0);
        assert!(weights[2] > 900.0);
        assert_eq!(weights[3], 0.0);
        assert!(laplace_threshold_weights(&[0, 1, 2, 0], scale, 1000, &key, 2)
            .iter()
            .all(|&w| w == 0.0));
    }

    #[test]
    fn every_count_gets_noise_including_zeros() {
        let key = NoiseKey::from_user_seed(3);
        let variance = crate::noise::discrete_gaussian::round_up_variance(25.0).unwrap();
        let counts = vec![0u64; 40_000];
        let noisy = gaussian_counts(&counts, variance, &key, 1);
        let nonzero = noisy.iter().filter(|&&c| c != 0).count() as f64 / counts.len() as f64;
        // P(N_Z(0, 25) = 0) ≈ 1/(5√(2π)) ≈ 0.0798.
        assert!((nonzero - (1.0 - 0.0798)).abs() < 0.01, "{nonzero}");
        let variance_seen = noisy.iter().map(|&c| (c * c) as f64).sum::<f64>() / counts.len() as f64;
        assert!((variance_seen - 25.0).abs() < 1.0, "{variance_seen}");
        // Another step draws other noise; the same step the same noise, whatever the thread count.
        assert_ne!(noisy, gaussian_counts(&counts, variance, &key, 2));
        let single = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap()
            .install(|| gaussian_counts(&counts, variance, &key, 1));
        assert_eq!(noisy, single);
    }
}
