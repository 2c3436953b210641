//! One cell's counter: Algorithm 3 of the seed (inhomogeneous sparse counting), running Algorithm 2
//! (sparse counting with a finite horizon, do-while semantics) inside each time level with the Binary
//! Mechanism of Chan–Shi–Song on the closed segments (docs/mechanisms/online.md).
//!
//! Per level r (noise from [`CellLevelNoise`]):
//! - a segment starts with a noisy threshold λ ~ Lap_Z(4/ε); every step reads the input bit, adds it to
//!   the segment count N and outputs Ñ + S̃; then one check draws λ' ~ Lap_Z(4/ε) and closes the segment
//!   when N + λ' − λ > ⌊T0⌋. Reading before checking (do-while) means a segment never closes empty, so
//!   there are at most T_r segments, the Binary Mechanism's horizon.
//! - a closed segment's count goes to the Binary Mechanism; Ñ is its latest output.
//! - at the end of the level S̃ += (the level's true total) + Lap_Z(2/ε).
//!
//! The check of step t is run when step t+1 starts (or never, after the level's last step, where a
//! closing could not be output): the draws and what they depend on are those of the do-while loop, and
//! a counter at rest holds the output of the last step read.

use rand::Rng;

use crate::mechanism::online::plan::CellLevelNoise;
use crate::noise::discrete_laplace::sample_discrete_laplace;

/// The Binary Mechanism (Chan–Shi–Song 2011, Algorithm 2) over at most 2^L − 1 inputs: α[i] is the
/// p-sum of the current dyadic block of size 2^i, α̂[i] its noisy release.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BinaryMechanism {
    steps: u64,
    partial_sums: Vec<i64>,
    noisy_partial_sums: Vec<i64>,
}

impl BinaryMechanism {
    pub fn new(levels: u32) -> Self {
        BinaryMechanism {
            steps: 0,
            partial_sums: vec![0; levels as usize],
            noisy_partial_sums: vec![0; levels as usize],
        }
    }

    /// Rebuilds one from its saved parts (the state file).
    pub fn from_parts(steps: u64, partial_sums: Vec<i64>, noisy_partial_sums: Vec<i64>) -> Option<Self> {
        let fits = partial_sums.len() == noisy_partial_sums.len()
            && !partial_sums.is_empty()
            && partial_sums.len() <= 64
            && (partial_sums.len() == 64 || steps < 1u64 << partial_sums.len());
        fits.then_some(BinaryMechanism {
            steps,
            partial_sums,
            noisy_partial_sums,
        })
    }

    pub fn steps(&self) -> u64 {
        self.steps
    }

    pub fn partial_sums(&self) -> &[i64] {
        &self.partial_sums
    }

    pub fn noisy_partial_sums(&self) -> &[i64] {
        &self.noisy_partial_sums
    }

    /// Feeds input z at the next step τ and returns B(τ) = Σ_{bit k of τ set} α̂[k].
    pub fn feed<R: Rng + ?Sized>(&mut self, input: i64, noise: &CellLevelNoise, rng: &mut R) -> i64 {
        self.steps += 1;
        let step = self.steps;
        let lowest = step.trailing_zeros() as usize;
        assert!(
            lowest < self.partial_sums.len(),
            "the Binary Mechanism's horizon was exceeded: a bug in the segment count bound"
        );
        let carried: i64 = self.partial_sums[..lowest].iter().sum();
        self.partial_sums[lowest] = carried + input;
        for k in 0..lowest {
            self.partial_sums[k] = 0;
            self.noisy_partial_sums[k] = 0;
        }
        self.noisy_partial_sums[lowest] =
            self.partial_sums[lowest] + sample_discrete_laplace(rng, noise.binary);
        self.output()
    }

    /// B(τ) for the current step.
    pub fn output(&self) -> i64 {
        (0..self.noisy_partial_sums.len())
            .filter(|&k| self.steps >> k & 1 == 1)
            .map(|k| self.noisy_partial_sums[k])
            .sum()
    }
}

/// One cell's Algorithm 3 state.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SparseCounter {
    /// S̃: the noisy totals of the finished levels.
    pub noisy_past_levels: i64,
    /// The true count of the current level (for its S̃ update).
    pub level_count: u64,
    /// N of the open segment.
    pub segment_count: u64,
    /// λ of the open segment's threshold.
    pub threshold_noise: i64,
    /// Ñ: the Binary Mechanism's output after the last closed segment (0 before any).
    pub closed_segments_output: i64,
    /// The Binary Mechanism of the current level, made when its first segment closes (most cells
    /// never close one at practical sizes: see the note's §1.11).
    pub binary: Option<Box<BinaryMechanism>>,
}

impl SparseCounter {
    /// The counter's current output N_θ = S̃ + Ñ.
    pub fn output(&self) -> i64 {
        self.noisy_past_levels + self.closed_segments_output
    }

    /// Starts a level: a fresh segment with its threshold noise, a fresh Binary Mechanism.
    pub fn start_level<R: Rng + ?Sized>(&mut self, noise: &CellLevelNoise, rng: &mut R) {
        self.level_count = 0;
        self.segment_count = 0;
        self.closed_segments_output = 0;
        self.binary = None;
        self.threshold_noise = sample_discrete_laplace(rng, noise.threshold);
    }

    /// Ends a level: S̃ ← S̃ + (the level's total) + Lap_Z(2/ε).
    pub fn finish_level<R: Rng + ?Sized>(&mut self, noise: &CellLevelNoise, rng: &mut R) {
        self.noisy_past_levels +=
            self.level_count as i64 + sample_discrete_laplace(rng, noise.level_total);
    }

    /// Reads one input bit (the do-while loop's body, before its check).
    pub fn read(&mut self, bit: bool) {
        self.level_count += u64::from(bit);
        self.segment_count += u64::from(bit);
    }

    /// The check after a read: closes the segment when N + λ' − λ > ⌊T0⌋ with a fresh λ'. Returns
    /// whether it closed.
    pub fn check<R: Rng + ?Sized>(&mut self, noise: &CellLevelNoise, rng: &mut R) -> bool {
        let check_noise = sample_discrete_laplace(rng, noise.check);
        let excess = i128::from(self.segment_count as i64) + i128::from(check_noise)
            - i128::from(self.threshold_noise);
        if excess <= i128::from(noise.threshold_floor) {
            return false;
        }
        let binary = self
            .binary
            .get_or_insert_with(|| Box::new(BinaryMechanism::new(noise.binary_levels)));
        self.closed_segments_output = binary.feed(self.segment_count as i64, noise, rng);
        self.segment_count = 0;
        self.threshold_noise = sample_discrete_laplace(rng, noise.threshold);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mechanism::online::plan::OnlinePlan;
    use crate::noise::discrete_laplace::RationalScale;
    use rand::SeedableRng;
    use rand_chacha::ChaCha12Rng;

    fn noise_with(epsilon: f64, horizon: u64, threshold_floor: i64) -> CellLevelNoise {
        let scale = |sigma: f64| RationalScale::round_up(sigma).unwrap();
        let binary_levels = (u64::BITS - horizon.leading_zeros()).max(1);
        CellLevelNoise {
            epsilon,
            horizon,
            threshold_floor,
            threshold: scale(4.0 / epsilon),
            check: scale(4.0 / epsilon),
            binary_levels,
            binary: scale(4.0 * f64::from(binary_levels) / epsilon),
            level_total: scale(2.0 / epsilon),
        }
    }

    /// Runs one level over `bits` and returns (output after each read, closings after each read).
    fn run_level(bits: &[bool], noise: &CellLevelNoise, seed: u64) -> (Vec<i64>, Vec<bool>, SparseCounter) {
        let mut rng = ChaCha12Rng::seed_from_u64(seed);
        let mut counter = SparseCounter::default();
        counter.start_level(noise, &mut rng);
        let mut outputs = Vec::new();
        let mut closings = Vec::new();
        for (step, &bit) in bits.iter().enumerate() {
            counter.read(bit);
            outputs.push(counter.output());
            let last = step + 1 == bits.len();
            closings.push(!last && counter.check(noise, &mut rng));
        }
        (outputs, closings, counter)
    }

    #[test]
    fn outputs_are_constant_inside_a_segment_and_segments_never_exceed_the_horizon() {
        // Large ε and a low threshold: segments close often, so many boundaries are exercised.
        let horizon = 300;
        let noise = noise_with(20.0, horizon, 1);
        let mut total_closings = 0;
        for seed in 0..40 {
            let bits: Vec<bool> = (0..horizon).map(|i| (i * 7 + seed) % 3 == 0).collect();
            let (outputs, closings, counter) = run_level(&bits, &noise, seed);
            for step in 1..outputs.len() {
                if !closings[step - 1] {
                    assert_eq!(outputs[step], outputs[step - 1], "seed {seed} step {step}");
                }
            }
            let closed = closings.iter().filter(|&&c| c).count() as u64;
            assert!(closed <= horizon);
            assert_eq!(counter.binary.as_ref().map_or(0, |b| b.steps()), closed);
            total_closings += closed;
        }
        assert!(total_closings > 100, "the test never closed segments");
        // Even an all-zero stream with a threshold far below the noise closes at most once a step.
        let noise = noise_with(20.0, 64, -1_000);
        let (_, closings, counter) = run_level(&[false; 64], &noise, 3);
        assert_eq!(closings.iter().filter(|&&c| c).count(), 63);
        assert_eq!(counter.binary.unwrap().steps(), 63);
    }

    #[test]
    fn the_level_total_enters_the_running_sum_with_its_noise() {
        let noise = noise_with(1.0, 10, 1_000_000);
        let mut sum_error = 0i64;
        let runs = 4000;
        for seed in 0..runs {
            let bits = [true, false, true, true, false, false, true, false, false, true];
            let (_, closings, mut counter) = run_level(&bits, &noise, seed);
            assert!(closings.iter().all(|&c| !c), "a threshold of 10^6 never closes");
            let mut rng = ChaCha12Rng::seed_from_u64(seed ^ 0xabc);
            counter.finish_level(&noise, &mut rng);
            sum_error += counter.output() - 5;
        }
        // Lap_Z(2): standard deviation < 2√2, so the mean of 4000 errors is within ±0.2 at 4.5 sd.
        assert!((sum_error as f64 / runs as f64).abs() < 0.2);
    }

    /// Var(Lap_Z(σ)) = 2q/(1−q)² with q = e^{−1/σ}.
    fn laplace_variance(sigma: f64) -> f64 {
        let q = (-1.0 / sigma).exp();
        2.0 * q / ((1.0 - q) * (1.0 - q))
    }

    #[test]
    fn binary_mechanism_error_matches_its_lemma_over_many_seeds() {
        // Error at τ is the sum of popcount(τ) independent Lap_Z(4L/ε): mean 0, variance popcount(τ)·Var,
        // so E|error| ≤ √(L·Var) = O(L^{1.5}/ε), the Lemma's log^{1.5} T / ε. Halving the scale would
        // quarter the variance and fail the lower check.
        let horizon = 63u64;
        let noise = noise_with(2.0, horizon, 0);
        let variance = laplace_variance(noise.binary.to_f64());
        let runs = 3000;
        let mut squared = vec![0f64; horizon as usize];
        let mut sums = vec![0f64; horizon as usize];
        for seed in 0..runs {
            let mut rng = ChaCha12Rng::seed_from_u64(seed);
            let mut binary = BinaryMechanism::new(noise.binary_levels);
            let mut truth = 0i64;
            for step in 0..horizon {
                let input = ((step * 5 + seed) % 4) as i64;
                truth += input;
                let error = (binary.feed(input, &noise, &mut rng) - truth) as f64;
                squared[step as usize] += error * error;
                sums[step as usize] += error;
            }
        }
        let levels = f64::from(noise.binary_levels);
        for step in 1..=horizon {
            let index = step as usize - 1;
            let expected = f64::from(step.count_ones()) * variance;
            let measured = squared[index] / runs as f64;
            // The sample variance of a sum of Laplace draws has relative sd ≈ √(5/runs) < 0.05.
            assert!(
                (measured / expected - 1.0).abs() < 0.25,
                "τ = {step}: mean squared error {measured}, expected {expected}"
            );
            assert!(measured <= levels * variance * 1.25);
            let mean = sums[index] / runs as f64;
            assert!(mean.abs() < 4.5 * (expected / runs as f64).sqrt() + 1e-9, "τ = {step}: mean {mean}");
        }
        // The Lemma's form: E|error| ≤ √(L · 2σ²) with σ = 4L/ε, i.e. √2 · 4 L^{1.5}/ε.
        let worst = squared.iter().map(|s| (s / runs as f64).sqrt()).fold(0.0, f64::max);
        assert!(worst <= 2f64.sqrt() * 4.0 * levels.powf(1.5) / noise.epsilon * 1.1);
    }

    #[test]
    fn the_closing_rate_matches_the_exact_law_of_both_noises() {
        // On an all-zero stream a segment closes at a check with probability P(λ' − λ > k) (N = 0,
        // k = ⌊T0⌋) for the one λ of the segment; a closing draws a new λ. The first check's closing
        // probability is exactly P(Z' − Z > k) for independent Lap_Z(σ_check), Lap_Z(σ_threshold).
        // Halving either scale moves it far outside the tolerance.
        let noise = noise_with(4.0, 4, 2);
        let pmf = |sigma: f64, z: i64| {
            let q = (-1.0 / sigma).exp();
            (1.0 - q) / (1.0 + q) * q.powi(z.abs() as i32)
        };
        let (threshold_sigma, check_sigma) = (noise.threshold.to_f64(), noise.check.to_f64());
        let mut exact = 0.0;
        for threshold in -60i64..=60 {
            for check in -60i64..=60 {
                if check - threshold > noise.threshold_floor {
                    exact += pmf(threshold_sigma, threshold) * pmf(check_sigma, check);
                }
            }
        }
        let runs = 100_000u64;
        let mut closed = 0u64;
        for seed in 0..runs {
            let (_, closings, _) = run_level(&[false, false], &noise, seed);
            closed += u64::from(closings[0]);
        }
        let measured = closed as f64 / runs as f64;
        let standard_error = (exact * (1.0 - exact) / runs as f64).sqrt();
        assert!(
            (measured - exact).abs() < 4.5 * standard_error,
            "closing rate {measured}, exact {exact}"
        );
        // With a halved check or threshold scale the rate would be far off this.
        let halved = {
            let mut rate = 0.0;
            for threshold in -60i64..=60 {
                for check in -60i64..=60 {
                    if check - threshold > noise.threshold_floor {
                        rate += pmf(threshold_sigma, threshold) * pmf(check_sigma / 2.0, check);
                    }
                }
            }
            rate
        };
        assert!((halved - exact).abs() > 10.0 * standard_error, "the test could not tell a halved scale");
    }

    #[test]
    fn plan_noise_keeps_the_binary_mechanism_inside_its_horizon() {
        // Every level length the plan makes gives L with T_r ≤ 2^L − 1.
        let plan = OnlinePlan::new(0.7, 2).unwrap();
        for level in 0..25 {
            if plan.level_length(level) == 0 {
                continue;
            }
            let noise = plan.cell_noise(1, level.max(1)).unwrap();
            let horizon = plan.level_length(level.max(1));
            assert!(horizon < 1u64 << noise.binary_levels);
        }
    }
}
