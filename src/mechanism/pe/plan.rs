//! PE's plan (from public inputs only: n under replace, d, ε, δ and the options) and its release.
//!
//! Defaults (the paper's §6 setup and Theorem 4.1, computed from public inputs; docs/mechanisms/pe.md):
//! - T = max(1, round(2·ln(nε)));
//! - ρ = the largest zCDP budget with δ(ρ, ε) ≤ δ; per step ρ/T, so the count noise has
//!   σ_c² = Δ²/(2ρ/T) = T/ρ (Δ² = 2), rounded up; σ = σ_c/n on the probability scale;
//! - d' = max(d, 2), α = D·σ^{1/d'}, L = max(1, ⌈log2(D/α)⌉), v = 2L + 1, n_s = ⌈1/(σ·v^{1−1/d'})⌉;
//! - laplace-threshold: per step (ε/T, δ/T): Lap_Z(b) with b = 2T/ε (ℓ1 sensitivity 2 of the counts,
//!   rounded up) and a bin kept when its noisy count reaches 1 + ⌈b·ln(2T/δ)⌉, so that each of the two
//!   bins a replaced row can create or empty survives with probability ≤ e^{−k/b} ≤ δ/(2T).

use super::histogram::{
    gaussian_counts, laplace_threshold_weights, project_bounded_lipschitz, threshold_weights,
    MAX_PROJECTION_CANDIDATES,
};
use super::report::{PeParameters, PePrivacy, PeStep};
use super::search::{read_rows, NearestSearch};
use super::variation::{resample, step_rng, variation_sigmas, variations, PeDomain};
use super::options::PeOptions;
use super::{PeInit, PeVariant};
use crate::binner::device::DeviceChoice;
use crate::binner::pass::DataPass;
use crate::error::{Error, Result};
use crate::io::source::Source;
use crate::mechanism::options::value_name;
use crate::mechanism::{
    AccuracyBound, MechanismParameters, PublicInputs, Release, ReleasedMeasure, NORMALISED_UNITS,
};
use crate::noise::discrete_gaussian::{round_up_variance, MAX_VARIANCE};
use crate::noise::discrete_laplace::RationalScale;
use crate::privacy::{noise_scale, zcdp, Budget, Neighbours, RunSeeds, SCALE_SAFETY_MARGIN};
use crate::progress::Timings;

/// The largest candidate set per step (its histogram is held per thread).
pub const MAX_CANDIDATES: usize = 1 << 22;

/// Purposes of the post-processing streams, one per kind of draw.
const INIT_DRAWS: u64 = 1;
const VARIATION_DRAWS: u64 = 2;
const RESAMPLE_DRAWS: u64 = 3;

pub const ACCURACY_FORMULA: &str = "the diameter D = 1 (trivial): Theorem 4.1's explicit constants \
     (and the unknown constant of Lei 2020) exceed D at practical n, so no tighter bound is claimed";

/// The laplace-threshold variant's per-step release.
#[derive(Clone, Copy, Debug)]
pub struct LaplaceStep {
    pub scale: RationalScale,
    /// A bin is kept when its noisy count reaches this.
    pub threshold_count: u64,
    pub epsilon: f64,
    pub delta: f64,
}

/// How the counts are privatised.
#[derive(Clone, Copy, Debug)]
enum StepNoise {
    /// Discrete Gaussian of this variance on every count; ρ per step.
    Gaussian { variance: RationalScale, rho: f64 },
    Laplace(LaplaceStep),
}

#[derive(Clone, Debug)]
pub struct PePlan {
    n: u64,
    dims: usize,
    epsilon: f64,
    delta: f64,
    variant: PeVariant,
    domain: PeDomain,
    init: PeInit,
    steps: u32,
    steps_rule: String,
    sigma: f64,
    alpha: f64,
    scales: u32,
    sigmas: Vec<f64>,
    samples: usize,
    samples_rule: String,
    threshold: f64,
    noise: StepNoise,
    device: DeviceChoice,
    /// Above n·d·8 bytes of rows the steps read them again instead of holding them.
    memory_limit: u64,
}

impl PePlan {
    pub fn new(public: &PublicInputs, options: &PeOptions) -> Result<Self> {
        if public.neighbours != Neighbours::Replace {
            return Err(Error::privacy(
                "--mechanism pe supports --neighbours replace only: it normalises its histogram by the \
                 public n (the paper's relation); under add-remove n is private",
            ));
        }
        let (n, dims, epsilon, delta) = (public.file_rows, public.dims, public.epsilon, options.delta);
        if !(delta > 0.0 && delta < 1.0) {
            return Err(Error::bad_input(format!(
                "--mechanism pe needs --delta strictly between 0 and 1, got {delta}"
            )));
        }
        if n == 0 {
            return Err(Error::bad_input("--mechanism pe needs at least one row"));
        }
        let (steps, steps_rule) = match options.steps {
            Some(0) => return Err(Error::bad_input("--pe-steps must be at least 1")),
            Some(steps) => (steps, format!("--pe-steps {steps}")),
            None => (
                (2.0 * (n as f64 * epsilon).ln()).round().max(1.0) as u32,
                "T = max(1, round(2 ln(n epsilon))) (the paper's simulations)".to_string(),
            ),
        };
        let rho_total = zcdp::rho_for(epsilon, delta)?;
        let count_variance = f64::from(steps) / rho_total * (1.0 + SCALE_SAFETY_MARGIN);
        let variance = round_up_variance(count_variance).ok_or_else(|| {
            Error::bad_input(format!(
                "--mechanism pe would need a count noise variance of {count_variance:e} (at most {MAX_VARIANCE:e}): \
                 choose a larger epsilon or delta, or fewer --pe-steps"
            ))
        })?;
        let rho_step = 1.0 / variance.to_f64();
        let sigma = variance.to_f64().sqrt() / n as f64;
        let d_prime = dims.max(2) as f64;
        let alpha = PeDomain::DIAMETER * sigma.powf(1.0 / d_prime);
        let scales = (PeDomain::DIAMETER / alpha).log2().ceil().max(1.0) as u32;
        let per_point = 2 * scales as usize + 1;
        let (samples, samples_rule) = match options.samples {
            Some(0) => return Err(Error::bad_input("--pe-samples must be at least 1")),
            Some(samples) => (samples as usize, format!("--pe-samples {samples}")),
            None => (
                (1.0 / (sigma * (per_point as f64).powf(1.0 - 1.0 / d_prime))).ceil().max(1.0) as usize,
                "n_s = ceil(1/(sigma v^(1-1/d'))) (Theorem 4.1)".to_string(),
            ),
        };
        let candidates = samples.saturating_mul(per_point);
        if candidates > MAX_CANDIDATES {
            return Err(Error::bad_input(format!(
                "--mechanism pe: {candidates} candidates per step (n_s = {samples}, v = {per_point}) exceed \
                 {MAX_CANDIDATES}; give fewer --pe-samples"
            )));
        }
        if options.variant == PeVariant::Projection && candidates > MAX_PROJECTION_CANDIDATES {
            return Err(Error::bad_input(format!(
                "--pe-variant projection: {candidates} candidates per step (n_s = {samples}, v = {per_point}) \
                 exceed the dense D_BL projection's limit of {MAX_PROJECTION_CANDIDATES}; give --pe-samples \
                 at most {} or use --pe-variant threshold",
                MAX_PROJECTION_CANDIDATES / per_point
            )));
        }
        let noise = match options.variant {
            PeVariant::Projection | PeVariant::Threshold => StepNoise::Gaussian {
                variance,
                rho: rho_step,
            },
            PeVariant::LaplaceThreshold => {
                let steps = f64::from(steps);
                let scale = noise_scale(2.0 * steps / epsilon, "--pe-variant laplace-threshold")?;
                let b = scale.to_f64();
                let margin = (b * (2.0 * steps / delta).ln()).ceil();
                StepNoise::Laplace(LaplaceStep {
                    scale,
                    threshold_count: 1 + margin as u64,
                    epsilon: 2.0 / b,
                    delta: 2.0 * (-margin / b).exp(),
                })
            }
        };
        if let Some(threshold) = options.threshold {
            if options.variant != PeVariant::Threshold || !(0.0..1.0).contains(&threshold) {
                return Err(Error::bad_input(format!(
                    "--pe-threshold applies to --pe-variant threshold and must be in [0, 1), got {threshold}"
                )));
            }
        }
        Ok(PePlan {
            n,
            dims,
            epsilon,
            delta,
            variant: options.variant,
            domain: options.domain,
            init: options.init.clone(),
            steps,
            steps_rule,
            sigma,
            alpha,
            scales,
            sigmas: variation_sigmas(alpha, scales, dims),
            samples,
            samples_rule,
            threshold: options.threshold.unwrap_or(0.0),
            noise,
            device: options.device,
            memory_limit: public.memory_limit,
        })
    }

    /// The budget of the whole run, from the rounded scales.
    pub fn budget(&self) -> Budget {
        match self.noise {
            StepNoise::Gaussian { rho, .. } => {
                let mut budget = Budget::zcdp(self.epsilon, self.delta);
                for step in 1..=self.steps {
                    budget.spend_rho(format!("step {step} nearest-neighbour counts"), rho);
                }
                budget
            }
            StepNoise::Laplace(laplace) => {
                let mut budget = Budget::approximate(self.epsilon, self.delta);
                for step in 1..=self.steps {
                    budget.spend_approximate(
                        format!("step {step} nearest-neighbour counts"),
                        laplace.epsilon,
                        laplace.delta,
                    );
                }
                budget
            }
        }
    }

    /// The variance of the discrete Gaussian on the counts (Gaussian variants).
    #[cfg(any(test, feature = "internals"))]
    pub fn count_variance(&self) -> Option<RationalScale> {
        match self.noise {
            StepNoise::Gaussian { variance, .. } => Some(variance),
            StepNoise::Laplace(_) => None,
        }
    }

    #[cfg(any(test, feature = "internals"))]
    pub fn steps(&self) -> u32 {
        self.steps
    }

    #[cfg(any(test, feature = "internals"))]
    pub fn samples(&self) -> usize {
        self.samples
    }

    pub fn candidates_per_step(&self) -> usize {
        self.samples * (2 * self.scales as usize + 1)
    }

    /// Reads the rows once (or, above the memory limit, at every step), then runs the T steps.
    pub fn release(
        &self,
        data: &DataPass,
        seeds: &RunSeeds,
        timings: &mut Timings,
    ) -> Result<Release> {
        let metric = self.domain.metric();
        let (search, scan) = timings.time("read rows", || {
            let candidates = self.candidates_per_step();
            let search = NearestSearch::for_run(self.device, metric, data, self.n, self.memory_limit, candidates);
            // Across ranks a rank may fail here alone (its GPU): every rank agrees before the steps' sums.
            data.agreed(search)
        })?;
        let seed = seeds.evolution();
        // --pe-init's public file is read on each rank, and may fail on one alone.
        let mut points = timings.time("initial points", || data.agreed(self.initial_points(data, seed)))?;
        let mut log = Vec::with_capacity(self.steps as usize);
        timings.time("evolve", || -> Result<()> {
            for step in 1..=self.steps {
                let mut rng = step_rng(seed, VARIATION_DRAWS, step);
                let candidates = variations(self.domain, &points, self.dims, &self.sigmas, &mut rng);
                let counts = search.counts(&candidates)?;
                let mut d_bl = None;
                let weights = match (self.noise, self.variant) {
                    (StepNoise::Gaussian { variance, .. }, PeVariant::Projection) => {
                        let noisy = gaussian_counts(&counts, variance, &seeds.noise, step);
                        let projection = project_bounded_lipschitz(
                            metric,
                            &candidates,
                            self.dims,
                            &noisy,
                            self.n,
                            PeDomain::DIAMETER,
                        )?;
                        d_bl = Some(projection.distance);
                        projection.masses.iter().map(|&m| m as f64).collect()
                    }
                    (StepNoise::Gaussian { variance, .. }, _) => {
                        let noisy = gaussian_counts(&counts, variance, &seeds.noise, step);
                        threshold_weights(&noisy, self.threshold * self.n as f64)
                    }
                    (StepNoise::Laplace(laplace), _) => laplace_threshold_weights(
                        &counts,
                        laplace.scale,
                        laplace.threshold_count,
                        &seeds.noise,
                        step,
                    ),
                };
                drop(counts);
                let kept = weights.iter().filter(|&&w| w > 0.0).count();
                // Nothing survived: keep S_{t−1} (post-processing; the paper leaves this case open).
                if kept > 0 {
                    let mut rng = step_rng(seed, RESAMPLE_DRAWS, step);
                    points = resample(&candidates, self.dims, &weights, self.samples, &mut rng);
                }
                log.push(PeStep {
                    step,
                    candidates: candidates.len() / self.dims,
                    kept_candidates: kept,
                    kept_previous_points: kept == 0,
                    d_bl_to_noisy_histogram: d_bl,
                });
            }
            Ok(())
        })?;
        let (method, device) = (search.method(), search.device().to_string());
        drop(search);
        let budget = self.budget();
        Ok(Release {
            mechanism: "pe",
            parameters: MechanismParameters::Pe(Box::new(self.parameters(&budget, log, method))),
            budget,
            root_count: self.n,
            root_count_is: "public n (replace)",
            accuracy: AccuracyBound {
                expected_w1_bound: PeDomain::DIAMETER,
                units: NORMALISED_UNITS,
                n: self.n,
                formula: ACCURACY_FORMULA,
                holds_for_table: true,
            },
            measure: ReleasedMeasure::Points {
                dims: self.dims,
                points,
                rows: self.n,
            },
            anonymity: None,
            scan,
            covariance_loss: None,
            binning: device,
            output_phase: "write",
        })
    }

    /// S_0: n_s points from the public Random_API the user chose.
    fn initial_points(&self, data: &DataPass, seed: u64) -> Result<Vec<f64>> {
        let mut rng = step_rng(seed, INIT_DRAWS, 0);
        let dims = self.dims;
        Ok(match &self.init {
            PeInit::Uniform => {
                let mut points = vec![0.0; self.samples * dims];
                for point in points.chunks_exact_mut(dims) {
                    self.domain.uniform_point(&mut rng, point);
                }
                points
            }
            PeInit::Centre => vec![0.5; self.samples * dims],
            PeInit::File(path) => {
                let source = Source::open(path)?;
                let names: Vec<String> = data.columns.iter().map(|c| c.name.clone()).collect();
                let columns = source.numeric_columns(&names)?;
                // The public table's columns come in its own schema order: bounds follow them, and
                // each row is put back in the run's column order.
                let position = |name: &str| names.iter().position(|n| n == name).expect("same names");
                let order: Vec<usize> = columns.iter().map(|c| position(&c.name)).collect();
                let bounds: Vec<_> = order.iter().map(|&k| data.bounds[k].clone()).collect();
                let public = DataPass {
                    source: &source,
                    columns: &columns,
                    bounds: &bounds,
                    nulls: crate::binner::NullPolicy::Drop,
                    progress: data.progress,
                    ranks: None,
                };
                let (read, _) = read_rows(&public, "pe initial points")?;
                if read.is_empty() {
                    return Err(Error::in_file(path, "--pe-init: the table has no usable rows"));
                }
                let mut rows = vec![0.0; read.len()];
                for (out, row) in rows.chunks_exact_mut(dims).zip(read.chunks_exact(dims)) {
                    for (&k, &x) in order.iter().zip(row) {
                        out[k] = x;
                    }
                }
                sort_points(&mut rows, dims);
                let weights = vec![1.0; rows.len() / dims];
                let mut points = resample(&rows, dims, &weights, self.samples, &mut rng);
                for point in points.chunks_exact_mut(dims) {
                    self.domain.project(point);
                }
                points
            }
        })
    }

    fn parameters(&self, budget: &Budget, steps: Vec<PeStep>, index: String) -> PeParameters {
        let (gaussian, laplace) = match self.noise {
            StepNoise::Gaussian { variance, rho } => (Some((variance, rho)), None),
            StepNoise::Laplace(laplace) => (None, Some(laplace)),
        };
        let (epsilon_spent, delta_spent) = match gaussian {
            Some(_) => {
                let rho = budget.spent_rho();
                (zcdp::epsilon_for(rho, self.delta), zcdp::delta_for(rho, self.epsilon))
            }
            None => (budget.spent(), budget.spent_delta()),
        };
        PeParameters {
            variant: value_name(&self.variant),
            domain: value_name(&self.domain),
            metric: match self.domain {
                PeDomain::Box => "l-infinity".to_string(),
                PeDomain::Ball => "l2".to_string(),
            },
            diameter: PeDomain::DIAMETER,
            init: self.init.describe(),
            steps: self.steps,
            steps_rule: self.steps_rule.clone(),
            sigma: self.sigma,
            alpha: self.alpha,
            alpha_rule: "alpha = D sigma^(1/d'), d' = max(d, 2) (Theorem 4.1)",
            scales: self.scales,
            scales_rule: "L = max(1, ceil(log2(D/alpha)))",
            variations_per_point: 2 * self.scales as usize + 1,
            variation_sigmas: self.sigmas.clone(),
            variation_sigmas_rule: "sigma_l = alpha 2^(l-1)/(sqrt(pi) K_d), K_d = (sqrt(d) + ln 2)^2 + ln 2 (proof of Lemma D.1)",
            samples: self.samples,
            samples_rule: self.samples_rule.clone(),
            candidates_per_step: self.candidates_per_step(),
            threshold: (self.variant == PeVariant::Threshold).then_some(self.threshold),
            privacy: PePrivacy {
                accountant: budget.accountant.describe(),
                sensitivity: "replace one row: one vote moves, l2 sensitivity sqrt(2) and l1 sensitivity 2 on the integer counts",
                epsilon: self.epsilon,
                delta: self.delta,
                count_noise_variance: gaussian.map(|(v, _)| v.to_f64()),
                count_noise_variance_num: gaussian.map(|(v, _)| v.num()),
                count_noise_variance_den: gaussian.map(|(v, _)| v.den()),
                rho_per_step: gaussian.map(|(_, rho)| rho),
                rho_total: gaussian.map(|_| budget.spent_rho()),
                laplace_scale: laplace.map(|l| l.scale.to_f64()),
                laplace_scale_num: laplace.map(|l| l.scale.num()),
                laplace_scale_den: laplace.map(|l| l.scale.den()),
                laplace_threshold_count: laplace.map(|l| l.threshold_count),
                epsilon_per_step: laplace.map(|l| l.epsilon),
                delta_per_step: laplace.map(|l| l.delta),
                epsilon_spent,
                delta_spent,
                calibration: match gaussian {
                    Some(_) => "rho = largest with delta(rho, epsilon) <= delta; count variance T/rho rounded up; rho_step = 1/variance",
                    None => "per step (epsilon/T, delta/T): scale 2T/epsilon rounded up, threshold 1 + ceil(b ln(2T/delta))",
                },
            },
            steps_released: steps,
            nearest_neighbour_index: index,
        }
    }
}

/// Sorts points lexicographically, so that draws from them do not depend on the read order.
fn sort_points(points: &mut Vec<f64>, dims: usize) {
    let mut rows: Vec<&[f64]> = points.chunks_exact(dims).collect();
    rows.sort_by(|a, b| {
        a.iter()
            .zip(b.iter())
            .map(|(x, y)| x.total_cmp(y))
            .find(|order| order.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    *points = rows.concat();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::Placement;

    fn public(n: u64, dims: usize, epsilon: f64) -> PublicInputs<'static> {
        PublicInputs {
            dims,
            epsilon,
            neighbours: Neighbours::Replace,
            file_rows: n,
            memory_limit: 1 << 30,
            threads: 1,
            placement: Placement::DEFAULT,
            encoding: None,
        }
    }

    #[test]
    fn defaults_follow_the_papers_formulas() {
        // The notes' table (d = 2, ε = 1, δ = 1e-4) uses the analytic Gaussian; zCDP is a little more
        // conservative, so σ is a little larger, but T, L and v agree and n_s is close.
        let options = PeOptions::with_delta(1e-4);
        for (n, steps, scales) in [(1000u64, 14u32, 3u32), (10_000, 18, 5)] {
            let plan = PePlan::new(&public(n, 2, 1.0), &options).unwrap();
            assert_eq!(plan.steps, steps);
            assert_eq!(plan.scales, scales);
            let v = (2 * scales + 1) as f64;
            assert_eq!(plan.samples, (1.0 / (plan.sigma * v.sqrt())).ceil() as usize);
            // Identity of Theorem 4.1: n_s·v·σ = v^{1/d'} before rounding.
            assert!((plan.samples as f64 * v * plan.sigma - v.sqrt()).abs() <= v * plan.sigma);
            assert!((plan.alpha - plan.sigma.sqrt()).abs() < 1e-15);
        }
    }

    #[test]
    fn the_released_noise_meets_the_request_recomputed_independently() {
        for (n, epsilon, delta) in [(1000u64, 1.0, 1e-4), (50_000, 0.3, 1e-6), (200, 4.0, 1e-5)] {
            let plan = PePlan::new(&public(n, 3, epsilon), &PeOptions::with_delta(delta)).unwrap();
            let variance = plan.count_variance().unwrap();
            // From the rational variance alone: each step is Δ²/(2σ²) = 1/σ²-zCDP with Δ² = 2.
            let sigma_squared = variance.num() as f64 / variance.den() as f64;
            let rho = f64::from(plan.steps) / sigma_squared;
            assert!(zcdp::delta_for(rho, epsilon) <= delta);
            assert!(zcdp::epsilon_for(rho, delta) <= epsilon);
            // Tight: the calibration leaves almost nothing on the table.
            assert!(zcdp::delta_for(rho, epsilon) >= delta * 0.999);
            assert!(plan.budget().check().unwrap() <= epsilon);
        }
    }

    #[test]
    fn the_laplace_variant_spends_at_most_the_request_by_basic_composition() {
        let mut options = PeOptions::with_delta(1e-4);
        options.variant = PeVariant::LaplaceThreshold;
        let plan = PePlan::new(&public(10_000, 2, 1.0), &options).unwrap();
        let StepNoise::Laplace(laplace) = plan.noise else {
            panic!("laplace expected");
        };
        let steps = f64::from(plan.steps);
        assert!(laplace.epsilon * steps <= 1.0);
        assert!(laplace.delta * steps <= 1e-4);
        // The surviving tail at the threshold: P(Lap_Z(b) ≥ k) ≤ e^{−k/b}, two bins.
        let b = laplace.scale.to_f64();
        let k = (laplace.threshold_count - 1) as f64;
        assert!(2.0 * (-k / b).exp() <= 1e-4 / steps);
        assert!(plan.budget().check().is_ok());
    }

    #[test]
    fn add_remove_and_bad_parameters_are_refused() {
        let mut add_remove = public(1000, 2, 1.0);
        add_remove.neighbours = Neighbours::AddRemove;
        let error = PePlan::new(&add_remove, &PeOptions::with_delta(1e-5)).err().unwrap();
        assert!(error.to_string().contains("replace only"), "{error}");
        for delta in [0.0, 1.0, -1e-3] {
            assert!(PePlan::new(&public(1000, 2, 1.0), &PeOptions::with_delta(delta)).is_err());
        }
        let mut projection = PeOptions::with_delta(1e-4);
        projection.variant = PeVariant::Projection;
        let error = PePlan::new(&public(100_000, 2, 1.0), &projection).err().unwrap();
        assert!(error.to_string().contains("--pe-samples"), "{error}");
    }
}
