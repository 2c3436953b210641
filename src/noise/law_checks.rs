//! Test oracles for the integer noise samplers: the discrete Laplace law in closed form and a χ²
//! goodness-of-fit test, shared by the samplers' unit tests.

use std::collections::BTreeMap;

/// Below this p-value a goodness-of-fit test fails.
pub const MIN_P_VALUE: f64 = 1e-4;
/// Moment checks allow this many standard errors.
pub const STANDARD_ERRORS: f64 = 4.5;

/// The exact law, evaluated in f64 from the closed form (an independent oracle for the sampler).
pub struct Law {
    pub q: f64,
}

impl Law {
    pub fn new(sigma: f64) -> Self {
        Law {
            q: (-1.0 / sigma).exp(),
        }
    }
    pub fn pmf(&self, z: i64) -> f64 {
        (1.0 - self.q) / (1.0 + self.q) * self.q.powi(z.unsigned_abs() as i32)
    }
    /// P(Z ≥ c) for c ≥ 1.
    pub fn upper_tail(&self, c: i64) -> f64 {
        self.q.powi(c as i32) / (1.0 + self.q)
    }
    pub fn variance(&self) -> f64 {
        2.0 * self.q / (1.0 - self.q).powi(2)
    }
    pub fn mean_abs(&self) -> f64 {
        2.0 * self.q / (1.0 - self.q * self.q)
    }
    /// E Z^4 by summing the pmf until the terms vanish.
    pub fn fourth_moment(&self) -> f64 {
        (1..)
            .map(|z: i64| 2.0 * self.pmf(z) * (z as f64).powi(4))
            .take_while(|term| *term > 0.0)
            .take(1 << 24)
            .sum()
    }
}

/// Upper tail of the standard normal, 0.5·erfc(z/√2) (Numerical Recipes erfc, relative error < 1.2e-7).
fn normal_upper_tail(z: f64) -> f64 {
    let x = z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.5 * x.abs());
    let poly = -x * x - 1.26551223
        + t * (1.00002368
            + t * (0.37409196
                + t * (0.09678418
                    + t * (-0.18628806
                        + t * (0.27886807
                            + t * (-1.13520398
                                + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
    let erfc = t * poly.exp();
    0.5 * if x >= 0.0 { erfc } else { 2.0 - erfc }
}

/// P(χ²_dof ≥ statistic) by the Wilson–Hilferty cube-root normal approximation.
pub fn chi_square_p_value(statistic: f64, dof: usize) -> f64 {
    let k = dof as f64;
    let spread = 2.0 / (9.0 * k);
    let z = ((statistic / k).cbrt() - (1.0 - spread)) / spread.sqrt();
    normal_upper_tail(z)
}

/// Pearson's χ² of `samples` against `law`, outcomes merged left to right so every bin expects ≥ 5.
pub fn goodness_of_fit_p_value(samples: &[i64], law: &Law) -> f64 {
    let n = samples.len() as f64;
    let mut cutoff = 1;
    while n * law.upper_tail(cutoff + 1) >= 5.0 {
        cutoff += 1;
    }
    // Atoms in order: Z ≤ −cutoff, each z strictly between, Z ≥ cutoff.
    let mut counts: BTreeMap<i64, u64> = BTreeMap::new();
    for &z in samples {
        *counts.entry(z.clamp(-cutoff, cutoff)).or_default() += 1;
    }
    let tail = law.upper_tail(cutoff);
    let atoms = (-cutoff..=cutoff).map(|z| {
        let p = if z.abs() == cutoff { tail } else { law.pmf(z) };
        (n * p, counts.get(&z).copied().unwrap_or(0) as f64)
    });
    let mut bins: Vec<(f64, f64)> = Vec::new();
    let mut open = (0.0, 0.0);
    for (expected, observed) in atoms {
        open = (open.0 + expected, open.1 + observed);
        if open.0 >= 5.0 {
            bins.push(open);
            open = (0.0, 0.0);
        }
    }
    let last = bins.last_mut().expect("at least one bin");
    *last = (last.0 + open.0, last.1 + open.1);
    assert!(bins.len() >= 3, "too few bins for a meaningful test");
    let statistic: f64 = bins.iter().map(|(e, o)| (o - e) * (o - e) / e).sum();
    chi_square_p_value(statistic, bins.len() - 1)
}
