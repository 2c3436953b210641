//! Piecewise-linear CDFs on [0,1] of counts on equal cells (each cell's mass spread uniformly over it):
//! the released 1-D marginals as maps, for marginal calibration and for the quantile partition's axes.

/// The CDF on [0,1] of counts on equal cells, each spread uniformly over its cell: piecewise linear.
#[derive(Clone, Debug, PartialEq)]
pub struct CellCdf {
    /// cumulative[j] = share of the mass in cells 0..j (cumulative[0] = 0, the last = 1).
    cumulative: Vec<f64>,
}

impl CellCdf {
    /// `None` when the counts are all zero.
    pub fn from_counts(counts: &[u64]) -> Option<Self> {
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let mut running = 0u64;
        let mut cumulative = Vec::with_capacity(counts.len() + 1);
        cumulative.push(0.0);
        for &count in counts {
            running += count;
            cumulative.push(running as f64 / total as f64);
        }
        Some(CellCdf { cumulative })
    }

    /// F(x) = x: the CDF of one cell.
    pub fn uniform() -> Self {
        CellCdf {
            cumulative: vec![0.0, 1.0],
        }
    }

    /// weight·F + (1 − weight)·U, U the uniform CDF on [0,1]: still a CDF of counts on the same cells.
    pub fn mixed_with_uniform(&self, weight: f64) -> Self {
        let cells = self.cells() as f64;
        CellCdf {
            cumulative: self
                .cumulative
                .iter()
                .enumerate()
                .map(|(edge, &value)| weight * value + (1.0 - weight) * edge as f64 / cells)
                .collect(),
        }
    }

    fn cells(&self) -> usize {
        self.cumulative.len() - 1
    }

    /// F(x) for x in [0,1].
    pub fn value(&self, x: f64) -> f64 {
        let scaled = x.clamp(0.0, 1.0) * self.cells() as f64;
        let cell = (scaled as usize).min(self.cells() - 1);
        let (low, high) = (self.cumulative[cell], self.cumulative[cell + 1]);
        low + (scaled - cell as f64) * (high - low)
    }

    /// F⁻¹(u) for u in [0,1]: inside the cell where F reaches u, linearly (cells with no mass are skipped).
    pub fn inverse(&self, u: f64) -> f64 {
        let u = u.clamp(0.0, 1.0);
        // The first cell whose upper cumulative reaches u and that holds mass.
        let cell = self.cumulative[1..].partition_point(|&high| high < u).min(self.cells() - 1);
        let cell = (cell..self.cells())
            .find(|&j| self.cumulative[j + 1] > self.cumulative[j])
            .unwrap_or(cell);
        let (low, high) = (self.cumulative[cell], self.cumulative[cell + 1]);
        let within = if high > low { ((u - low) / (high - low)).clamp(0.0, 1.0) } else { 0.5 };
        (cell as f64 + within) / self.cells() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cdf_and_its_inverse_agree_where_there_is_mass() {
        let cdf = CellCdf::from_counts(&[2, 0, 1, 1]).unwrap();
        assert_eq!(cdf.value(0.0), 0.0);
        assert_eq!(cdf.value(0.125), 0.25);
        assert_eq!(cdf.value(0.25), 0.5);
        assert_eq!(cdf.value(0.4), 0.5, "no mass in the second cell");
        assert_eq!(cdf.value(1.0), 1.0);
        for x in [0.01, 0.2, 0.55, 0.7, 0.99] {
            assert!((cdf.inverse(cdf.value(x)) - x).abs() < 1e-12, "{x}");
        }
        // u = 1/2 is reached at the end of the first cell; the inverse skips the empty one.
        assert_eq!(cdf.inverse(0.5), 0.25);
        assert_eq!(cdf.inverse(0.5 + 1e-9), 0.5 + 1e-9);
        assert!(CellCdf::from_counts(&[0, 0]).is_none());
    }

    #[test]
    fn a_mixture_with_the_uniform_cdf_is_their_weighted_sum() {
        let cdf = CellCdf::from_counts(&[3, 0, 0, 1]).unwrap();
        let mixed = cdf.mixed_with_uniform(0.5);
        for x in [0.0, 0.1, 0.3, 0.5, 0.8, 1.0] {
            assert!((mixed.value(x) - (0.5 * cdf.value(x) + 0.5 * x)).abs() < 1e-15, "{x}");
        }
        assert_eq!(cdf.mixed_with_uniform(1.0), cdf);
        assert_eq!(cdf.mixed_with_uniform(0.0), CellCdf::from_counts(&[1, 1, 1, 1]).unwrap());
    }
}
