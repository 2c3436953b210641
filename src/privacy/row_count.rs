//! The noisy row count n̂ = max(0, n + Lap_Z(1/ε_n)). Under add-remove the row count n is private, so a
//! mechanism whose partition or normalisation depends on the size releases n̂ first, with a declared share
//! of ε (`--root-share`), and uses only n̂ afterwards.

use crate::error::Result;
use crate::noise::discrete_laplace::{sample_discrete_laplace, RationalScale};
use crate::privacy::{noise_scale, NoiseKey, NoiseStream};

/// The share of ε spent on n̂ by PMM and PSMM when they choose their partition from it.
pub const DEFAULT_NOISY_N_SHARE: f64 = 1.0 / 16.0;

/// The plan of one n̂ release: its scale (rounded up) and so the ε it spends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NoisyRowCount {
    pub scale: RationalScale,
}

impl NoisyRowCount {
    /// n̂ at ε_n: one row changes n by one, so Lap_Z(1/ε_n).
    pub fn plan(epsilon_n: f64) -> Result<Self> {
        Ok(NoisyRowCount {
            scale: noise_scale(1.0 / epsilon_n, "the noisy row count n̂")?,
        })
    }

    /// ε spent: 1/σ with the rounded scale.
    pub fn spent_epsilon(&self) -> f64 {
        1.0 / self.scale.to_f64()
    }

    /// n̂ = max(0, n + Lap_Z(σ)), from its own noise stream.
    pub fn release(&self, true_rows: u64, key: &NoiseKey) -> u64 {
        let mut rng = key.stream(NoiseStream::RowCount, 0);
        (true_rows as i64 + sample_discrete_laplace(&mut rng, self.scale)).max(0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spends_at_most_its_share_and_draws_from_its_own_stream() {
        for epsilon_n in [1e-3, 0.0625, 1.0, 7.3] {
            let plan = NoisyRowCount::plan(epsilon_n).unwrap();
            assert!(plan.spent_epsilon() <= epsilon_n);
            assert!(plan.spent_epsilon() >= epsilon_n * (1.0 - 1e-8));
        }
        // The released value depends on the key and the count only.
        let plan = NoisyRowCount::plan(0.5).unwrap();
        let key = NoiseKey::from_user_seed(3);
        assert_eq!(plan.release(1000, &key), plan.release(1000, &key));
        let released: Vec<u64> = (0..50)
            .map(|seed| plan.release(1000, &NoiseKey::from_user_seed(seed)))
            .collect();
        assert!(released.iter().any(|&n_hat| n_hat != 1000), "n̂ must be noisy");
    }
}
