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
//!
//! Checks are decided ahead ([`SparseCounter::run_steps`]): while N and λ stay put, the checks are
//! i.i.d., and the first of them that fires is found at once by [`first_exceedance`] (one 64-bit word
//! for the run, inverted in floating point where that is certain; the same law as drawing each check).
//! Only a run whose check fires at N = its segment's threshold or beyond (K ≤ 0 below: it fires within a
//! step or two) draws its checks one by one. A run
//! ends at a 1-bit read, at a closing or at the end of the level: points fixed by the data and the
//! plan, so where a feed stops never changes which draws are made (resuming ≡ one run).

use std::sync::OnceLock;

use rand::Rng;

use crate::mechanism::online::plan::CellLevelNoise;
use crate::noise::discrete_laplace::sample_discrete_laplace;
use crate::noise::exceedance::first_exceedance;
use crate::noise::laplace_table::ScaleSampler;

/// `closing_step` when no decided check closes.
const NEVER: u64 = u64::MAX;

/// The steps of the current time level.
#[derive(Clone, Copy, Debug)]
pub struct LevelSpan {
    /// Its first step (no check: the level starts with a fresh segment).
    pub first: u64,
    /// Its last step (its check would run in the next level, so it never runs).
    pub last: u64,
}

/// What the cells of one depth share during one level: its steps, its noise, and the table-driven
/// sampler of the check noise (one table serves every check of those cells; built at the first check
/// drawn one by one, since most levels of a short stream never draw one).
pub struct LevelChecks {
    pub span: LevelSpan,
    pub noise: CellLevelNoise,
    check: OnceLock<ScaleSampler>,
}

impl LevelChecks {
    pub fn new(span: LevelSpan, noise: CellLevelNoise) -> Self {
        LevelChecks {
            span,
            noise,
            check: OnceLock::new(),
        }
    }

    fn check_sampler(&self) -> &ScaleSampler {
        self.check.get_or_init(|| ScaleSampler::new(self.noise.check))
    }
}

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
#[derive(Clone, Debug, PartialEq, Eq)]
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
    /// The checks of the steps up to this one are already decided (0: none).
    pub decided_through: u64,
    /// The step whose decided check closes the segment (`u64::MAX`: none of them does).
    pub closing_step: u64,
}

impl Default for SparseCounter {
    fn default() -> Self {
        SparseCounter {
            noisy_past_levels: 0,
            level_count: 0,
            segment_count: 0,
            threshold_noise: 0,
            closed_segments_output: 0,
            binary: None,
            decided_through: 0,
            closing_step: NEVER,
        }
    }
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
        self.forget_decided_checks(0);
    }

    /// Ends a level: S̃ ← S̃ + (the level's total) + Lap_Z(2/ε).
    pub fn finish_level<R: Rng + ?Sized>(&mut self, noise: &CellLevelNoise, rng: &mut R) {
        self.noisy_past_levels +=
            self.level_count as i64 + sample_discrete_laplace(rng, noise.level_total);
    }

    /// Runs the steps `first..=last` of the level (all of them, in order, over as many calls as the
    /// feed takes): the pending check of each step but the level's first, then its read. `ones` are
    /// the offsets from `first` of the steps whose input bit is 1, ascending.
    pub fn run_steps<R: Rng + ?Sized>(
        &mut self,
        first: u64,
        last: u64,
        ones: &[u32],
        level: &LevelChecks,
        rng: &mut R,
    ) {
        let (span, noise) = (level.span, &level.noise);
        let mut ones = ones.iter().map(|&offset| first + u64::from(offset)).peekable();
        let mut step = first;
        while step <= last {
            let next_one = ones.peek().copied().unwrap_or(NEVER);
            if step == span.first {
                if next_one == step {
                    ones.next();
                    self.read(true);
                }
                step += 1;
                continue;
            }
            if self.decided_through < step {
                self.decide_checks(step, level, rng);
            }
            // Nothing happens before `stop`: the checks fail and the bits are 0.
            let stop = next_one.min(self.closing_step).min(self.decided_through).min(last);
            if stop == self.closing_step {
                self.close_segment(noise, rng);
                self.forget_decided_checks(stop);
            }
            if stop == next_one {
                ones.next();
                self.read(true);
                self.forget_decided_checks(stop);
            }
            step = stop + 1;
        }
    }

    /// Whether steps up to `last` without a 1-bit leave this counter as it is: its checks are decided
    /// that far and none of them closes. Such a counter draws nothing there.
    pub fn is_idle_through(&self, last: u64) -> bool {
        self.decided_through >= last && self.closing_step > last
    }

    /// Reads one input bit (the do-while loop's body, before its check).
    fn read(&mut self, bit: bool) {
        self.level_count += u64::from(bit);
        self.segment_count += u64::from(bit);
    }

    /// Decides the checks from step `step` on, while N and λ stay as they are: to the end of the level
    /// at once (up to the first that fires), or, when a check fires more often than not (K ≤ 0), the
    /// one check of `step`, drawn as such.
    fn decide_checks<R: Rng + ?Sized>(&mut self, step: u64, checks: &LevelChecks, rng: &mut R) {
        let noise = &checks.noise;
        let trials = checks.span.last - step + 1;
        // The check fires when λ' ≥ K with K = ⌊T0⌋ + λ − N + 1.
        let level = i128::from(noise.threshold_floor) + i128::from(self.threshold_noise)
            - i128::from(self.segment_count)
            + 1;
        match u64::try_from(level) {
            Ok(level) if level >= 1 => {
                self.closing_step =
                    first_exceedance(rng, noise.check, level, trials).map_or(NEVER, |index| step + index);
                self.decided_through = checks.span.last;
            }
            _ => {
                self.closing_step = if self.check_fires(checks, rng) { step } else { NEVER };
                self.decided_through = step;
            }
        }
    }

    /// After a read or a closing at `step`: the checks after it depend on the new N or λ.
    fn forget_decided_checks(&mut self, step: u64) {
        self.decided_through = step;
        self.closing_step = NEVER;
    }

    /// One check drawn as in the seed: a fresh λ', and whether N + λ' − λ > ⌊T0⌋.
    fn check_fires<R: Rng + ?Sized>(&self, checks: &LevelChecks, rng: &mut R) -> bool {
        let noise = &checks.noise;
        let check_noise = checks.check_sampler().sample(rng);
        let excess = i128::from(self.segment_count as i64) + i128::from(check_noise)
            - i128::from(self.threshold_noise);
        excess > i128::from(noise.threshold_floor)
    }

    /// A check fired: the segment's count goes to the Binary Mechanism and a new segment starts.
    fn close_segment<R: Rng + ?Sized>(&mut self, noise: &CellLevelNoise, rng: &mut R) {
        let binary = self
            .binary
            .get_or_insert_with(|| Box::new(BinaryMechanism::new(noise.binary_levels)));
        self.closed_segments_output = binary.feed(self.segment_count as i64, noise, rng);
        self.segment_count = 0;
        self.threshold_noise = sample_discrete_laplace(rng, noise.threshold);
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

    /// Runs one level over `bits` (steps 1..=n, one step per call) and returns (output after each
    /// read, closings after each read, the counter). A closing after the read of step t is the check
    /// that runs at step t + 1.
    fn run_level(bits: &[bool], noise: &CellLevelNoise, seed: u64) -> (Vec<i64>, Vec<bool>, SparseCounter) {
        let mut rng = ChaCha12Rng::seed_from_u64(seed);
        let mut counter = SparseCounter::default();
        counter.start_level(noise, &mut rng);
        let level = LevelChecks::new(LevelSpan { first: 1, last: bits.len() as u64 }, *noise);
        let closed = |counter: &SparseCounter| counter.binary.as_ref().map_or(0, |b| b.steps());
        let mut outputs = Vec::new();
        let mut closings = Vec::new();
        for (index, &bit) in bits.iter().enumerate() {
            let step = index as u64 + 1;
            let before = closed(&counter);
            let ones: &[u32] = if bit { &[0] } else { &[] };
            counter.run_steps(step, step, ones, &level, &mut rng);
            if step > 1 {
                closings.push(closed(&counter) > before);
            }
            outputs.push(counter.output());
        }
        closings.push(false);
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
    fn where_a_feed_stops_never_changes_the_draws() {
        // A threshold low enough that some segments close (one-by-one checks) and high enough that
        // most runs are decided ahead; dense and sparse stretches of ones.
        let noise = noise_with(4.0, 10_000, 60);
        let span = LevelSpan { first: 1, last: 10_000 };
        let level = LevelChecks::new(span, noise);
        let ones: Vec<u32> = (0..10_000u32)
            .filter(|&i| i % 97 == 0 || ((i / 1000) % 3 == 0 && i % 2 == 0))
            .collect();
        let run = |cuts: &[u64]| {
            let mut rng = ChaCha12Rng::seed_from_u64(5);
            let mut counter = SparseCounter::default();
            counter.start_level(&noise, &mut rng);
            let mut first = 1;
            for &last in cuts {
                let piece: Vec<u32> = ones
                    .iter()
                    .map(|&offset| u64::from(offset) + 1)
                    .filter(|&step| step >= first && step <= last)
                    .map(|step| (step - first) as u32)
                    .collect();
                counter.run_steps(first, last, &piece, &level, &mut rng);
                first = last + 1;
            }
            (counter, rng.get_word_pos())
        };
        let whole = run(&[10_000]);
        assert_eq!(whole, run(&[1, 2, 999, 1000, 1001, 7001, 10_000]));
        assert_eq!(whole, run(&(1..=10_000).collect::<Vec<u64>>()));
        assert!(whole.0.binary.as_ref().map_or(0, |b| b.steps()) > 0, "no segment closed");
        // A quiet cell decides its checks to the end of the level with one word.
        let mut rng = ChaCha12Rng::seed_from_u64(6);
        let mut quiet = SparseCounter::default();
        quiet.start_level(&noise, &mut rng);
        quiet.threshold_noise = 0;
        quiet.run_steps(1, 10, &[], &level, &mut rng);
        assert_eq!(quiet.decided_through, span.last);
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
