//! Zero-concentrated DP (Bun–Steinke 2016), the accountant of mechanisms that add Gaussian noise over
//! several steps (Private Evolution, docs/mechanisms/pe.md).
//!
//! - The discrete Gaussian N_Z(0, σ²) on an integer vector of ℓ2 sensitivity Δ is Δ²/(2σ²)-zCDP
//!   (Canonne–Kamath–Steinke 2020, Theorem 4), exactly as the continuous one: no floating-point gap.
//! - zCDP composes by adding ρ, adaptively.
//! - ρ-zCDP implies (ε, δ)-DP for δ = inf_{α>1} e^{(α−1)(αρ−ε)}/(α−1) · (1 − 1/α)^α (CKS 2020,
//!   Corollary 13), tighter than Bun–Steinke's ε = ρ + 2√(ρ log(1/δ)).
//!
//! The infimum is taken numerically (golden-section search on log(α − 1), where the log of the bound is
//! unimodal); a test recomputes it on a dense grid, and checks it against the exact (ε, δ) curve of the
//! continuous Gaussian of the same ρ, which it must bound from above.

use crate::error::{Error, Result};

/// Search interval for x = log(α − 1): α from 1 + e^−40 to 1 + e^60 covers every useful (ε, ρ).
const LOG_ALPHA_RANGE: (f64, f64) = (-40.0, 60.0);
const GOLDEN_SECTION_STEPS: usize = 300;
const BISECTION_STEPS: usize = 200;

/// log of the conversion bound at α.
fn log_delta_at(rho: f64, epsilon: f64, alpha: f64) -> f64 {
    (alpha - 1.0) * (alpha * rho - epsilon) - (alpha - 1.0).ln() + alpha * (-1.0 / alpha).ln_1p()
}

/// The δ such that a ρ-zCDP mechanism is (ε, δ)-DP (CKS Corollary 13), at most 1.
pub fn delta_for(rho: f64, epsilon: f64) -> f64 {
    if rho <= 0.0 {
        return 0.0;
    }
    let f = |x: f64| log_delta_at(rho, epsilon, 1.0 + x.exp());
    let (mut lo, mut hi) = LOG_ALPHA_RANGE;
    let ratio = (5f64.sqrt() - 1.0) / 2.0;
    let (mut a, mut b) = (hi - ratio * (hi - lo), lo + ratio * (hi - lo));
    let (mut fa, mut fb) = (f(a), f(b));
    for _ in 0..GOLDEN_SECTION_STEPS {
        if fa < fb {
            hi = b;
            (b, fb) = (a, fa);
            a = hi - ratio * (hi - lo);
            fa = f(a);
        } else {
            lo = a;
            (a, fa) = (b, fb);
            b = lo + ratio * (hi - lo);
            fb = f(b);
        }
    }
    fa.min(fb).exp().min(1.0)
}

/// The smallest ε with δ(ρ, ε) ≤ δ (bisection; δ(ρ, ·) decreases).
pub fn epsilon_for(rho: f64, delta: f64) -> f64 {
    if rho <= 0.0 {
        return 0.0;
    }
    let mut hi = 1.0;
    while delta_for(rho, hi) > delta {
        hi *= 2.0;
    }
    let mut lo = 0.0;
    for _ in 0..BISECTION_STEPS {
        let mid = 0.5 * (lo + hi);
        if delta_for(rho, mid) > delta {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// The largest ρ with δ(ρ, ε) ≤ δ (bisection; δ(·, ε) increases): the whole zCDP budget of an
/// (ε, δ) request.
pub fn rho_for(epsilon: f64, delta: f64) -> Result<f64> {
    if !(epsilon.is_finite() && epsilon > 0.0 && delta > 0.0 && delta < 1.0) {
        return Err(Error::bad_input(format!(
            "zCDP needs epsilon > 0 and 0 < delta < 1, got epsilon {epsilon}, delta {delta}"
        )));
    }
    let mut hi = epsilon;
    while delta_for(hi, epsilon) <= delta {
        hi *= 2.0;
    }
    let mut lo = 0.0;
    for _ in 0..BISECTION_STEPS {
        let mid = 0.5 * (lo + hi);
        if delta_for(mid, epsilon) <= delta {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Φ(x) = ½·erfc(−x/√2) by the complementary error function's continued fraction (x ≤ −3) or its
    /// Taylor series, to ~1e-14: an oracle independent of the conversion above.
    fn normal_cdf(x: f64) -> f64 {
        if x < -3.0 {
            // Φ(x) = φ(x) / (−x + 1/(−x + 2/(−x + 3/(…)))) for x < 0 (Laplace's continued fraction).
            let z = -x;
            let mut fraction = z;
            for k in (1..200).rev() {
                fraction = z + k as f64 / fraction;
            }
            (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt() / fraction
        } else if x > 3.0 {
            1.0 - normal_cdf(-x)
        } else {
            // Φ(x) = ½ + φ(x)·Σ x^{2k+1}/(1·3·…·(2k+1)).
            let (mut term, mut sum) = (x, x);
            for k in 1..300 {
                term *= x * x / (2 * k + 1) as f64;
                sum += term;
            }
            0.5 + (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt() * sum
        }
    }

    /// The exact δ(ε) of the continuous Gaussian mechanism with Δ/σ = μ (Balle–Wang Theorem 8).
    fn gaussian_delta(mu: f64, epsilon: f64) -> f64 {
        normal_cdf(-epsilon / mu + mu / 2.0) - epsilon.exp() * normal_cdf(-epsilon / mu - mu / 2.0)
    }

    #[test]
    fn the_infimum_matches_a_dense_grid() {
        for (rho, epsilon) in [(0.01, 1.0), (0.05, 0.5), (0.5, 3.0), (1e-4, 0.1)] {
            let grid = (1..200_000)
                .map(|i| log_delta_at(rho, epsilon, 1.0 + (i as f64 * 1e-4 - 12.0).exp()))
                .fold(f64::INFINITY, f64::min)
                .exp();
            let searched = delta_for(rho, epsilon);
            assert!(searched <= grid * (1.0 + 1e-6), "{searched} vs grid {grid}");
            assert!(searched >= grid * (1.0 - 1e-3), "{searched} vs grid {grid}");
        }
    }

    #[test]
    fn conversion_bounds_the_exact_gaussian_curve() {
        // A ρ-zCDP Gaussian has μ = √(2ρ); the conversion is an upper bound on its exact δ(ε), and not
        // a loose one.
        for (rho, epsilon) in [(0.01f64, 1.0f64), (0.03, 1.0), (0.2, 2.0), (0.002, 0.3)] {
            let exact = gaussian_delta((2.0 * rho).sqrt(), epsilon);
            let converted = delta_for(rho, epsilon);
            assert!(converted >= exact, "ρ {rho} ε {epsilon}: {converted} < exact {exact}");
            assert!(converted <= 20.0 * exact, "ρ {rho} ε {epsilon}: {converted} ≫ exact {exact}");
        }
    }

    #[test]
    fn calibration_round_trips() {
        for (epsilon, delta) in [(1.0, 1e-4), (0.5, 1e-6), (4.0, 1e-5), (0.1, 1e-3)] {
            let rho = rho_for(epsilon, delta).unwrap();
            let back = delta_for(rho, epsilon);
            assert!(back <= delta, "δ(ρ) = {back} above {delta}");
            assert!((back - delta).abs() <= 1e-9 * delta, "δ(ρ) = {back} vs {delta}");
            let epsilon_back = epsilon_for(rho, delta);
            assert!(epsilon_back <= epsilon && epsilon_back >= epsilon * (1.0 - 1e-9));
            // Tighter than Bun–Steinke's ε = ρ + 2√(ρ log(1/δ)).
            assert!(rho + 2.0 * (rho * (1.0 / delta).ln()).sqrt() > epsilon);
        }
        assert!(rho_for(1.0, 0.0).is_err());
        assert!(rho_for(1.0, 1.0).is_err());
    }
}
