//! The exponential mechanism on integer utilities, sampled exactly: index i with probability
//! ∝ exp(u_i/σ), σ an exact rational (docs/privacy.md, "Private domains").
//!
//! By rejection, with integer arithmetic only: propose i uniformly, accept it with probability
//! exp(−(u_max − u_i)/σ) by the Canonne–Kamath–Steinke Bernoulli(exp(−γ)) sampler (γ = (u_max − u_i)·den/num,
//! exact). An accepted index has exactly the law above, so the ε-DP proof of the exponential mechanism
//! holds as written: no floating-point exp, log or Gumbel draw is involved (the Gumbel-max trick in floats
//! would be exposed to Mironov-style attacks on the low bits). The candidate with the largest utility is
//! accepted for sure, so a draw takes at most K proposals on average for K candidates.
//!
//! The number of proposals depends on the utilities, so a draw's running time does too (as rejection
//! samplers' do); nothing of it reaches the release.

use rand::Rng;

use super::discrete_gaussian::bernoulli_exp;
use super::discrete_laplace::{uniform_below, RationalScale};

/// An index of `utilities` (at least one) drawn with probability ∝ exp(u_i/`scale`).
pub fn sample_exponential_mechanism<R: Rng + ?Sized>(rng: &mut R, utilities: &[i64], scale: RationalScale) -> usize {
    let best = *utilities.iter().max().expect("the exponential mechanism needs a candidate");
    let candidates = utilities.len() as u64;
    loop {
        let index = uniform_below(rng, candidates) as usize;
        // u_max − u_i < 2^64 and den ≤ 2^64: the product fits a u128.
        let gap = best.abs_diff(utilities[index]);
        if bernoulli_exp(rng, u128::from(gap) * u128::from(scale.den()), u128::from(scale.num())) {
            return index;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noise::law_checks::chi_square_p_value;
    use rand::SeedableRng;
    use rand_chacha::ChaCha12Rng;

    #[test]
    fn draws_follow_the_exponential_weights() {
        let utilities = [0, -1, -3, -2, -7, 0, -40, i64::MIN + 1];
        let scale = RationalScale::new(3, 2).unwrap();
        let weights: Vec<f64> = utilities.iter().map(|&u| (u as f64 / 1.5).exp()).collect();
        let total: f64 = weights.iter().sum();
        let draws = 200_000;
        let mut rng = ChaCha12Rng::seed_from_u64(7);
        let mut counts = vec![0u64; utilities.len()];
        for _ in 0..draws {
            counts[sample_exponential_mechanism(&mut rng, &utilities, scale)] += 1;
        }
        assert_eq!(counts[7], 0, "a utility of −2^63 is never drawn");
        // χ² over the candidates expected at least 5 times.
        let mut statistic = 0.0;
        let mut cells = 0;
        for (count, weight) in counts.iter().zip(&weights) {
            let expected = draws as f64 * weight / total;
            if expected >= 5.0 {
                statistic += (*count as f64 - expected).powi(2) / expected;
                cells += 1;
            }
        }
        let p = chi_square_p_value(statistic, cells - 1);
        assert!(p > 1e-4, "χ² = {statistic} on {cells} cells, p = {p}");
    }

    #[test]
    fn one_candidate_is_always_drawn() {
        let mut rng = ChaCha12Rng::seed_from_u64(1);
        let scale = RationalScale::new(1, 1).unwrap();
        assert_eq!(sample_exponential_mechanism(&mut rng, &[-5], scale), 0);
    }
}
