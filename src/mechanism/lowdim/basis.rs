//! The noisy spectrum of M̂ and the subspace: faer's self-adjoint eigendecomposition (eigenvalues come
//! back ascending), the d' eigenvectors of the algebraically largest eigenvalues (M̂ is indefinite:
//! |λ| would pick noise-driven negative directions), and the private choice of d' (paper 002, App. E).
//! All of it is post-processing of the released M̂.

use faer::{Mat, Side};

use crate::error::{Error, Result};

/// The eigenvalues of M̂ in descending (algebraic) order, with their orthonormal eigenvectors.
pub struct Spectrum {
    pub eigenvalues: Vec<f64>,
    /// Column j is the eigenvector of `eigenvalues[j]`.
    vectors: Mat<f64>,
}

impl Spectrum {
    /// The eigendecomposition of the symmetric d×d matrix `matrix` (row-major).
    pub fn of_symmetric(matrix: &[f64], dims: usize) -> Result<Self> {
        assert_eq!(matrix.len(), dims * dims);
        let matrix = Mat::<f64>::from_fn(dims, dims, |i, j| matrix[i * dims + j]);
        let eigen = matrix.self_adjoint_eigen(Side::Lower).map_err(|error| {
            Error::internal(format!("the eigendecomposition of M̂ failed: {error:?}"))
        })?;
        let ascending = eigen.S().column_vector();
        let eigenvalues = (0..dims).rev().map(|index| ascending[index]).collect();
        let vectors = Mat::from_fn(dims, dims, |row, column| {
            eigen.U()[(row, dims - 1 - column)]
        });
        Ok(Spectrum {
            eigenvalues,
            vectors,
        })
    }

    /// V̂: the eigenvectors of the `target_dim` largest eigenvalues, largest first (d × d').
    pub fn top_vectors(&self, target_dim: usize) -> Mat<f64> {
        self.vectors.get(.., ..target_dim).to_owned()
    }
}

/// The three terms of paper 002's Theorem 4.2 / (E.1) for d' = k, without their unknown constants:
/// √(max(0, Σ_{i>k} λ_i)) (rank-k error), √(k·d^2.5/(εn)) (private PCA), √(d/k)·(ε_s n)^{−1/k} (synthetic
/// data in k dimensions).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateTerms {
    pub target_dim: usize,
    pub tail: f64,
    pub private_pca: f64,
    pub synthetic: f64,
}

impl RateTerms {
    /// `eigenvalues` descending; `epsilon` the whole budget, `epsilon_subroutine` the subroutine's,
    /// `n` the public n (replace) or the released n̂ (add-remove).
    pub fn at(
        eigenvalues: &[f64],
        k: usize,
        epsilon: f64,
        epsilon_subroutine: f64,
        n: f64,
    ) -> Self {
        let d = eigenvalues.len() as f64;
        let tail: f64 = eigenvalues[k.min(eigenvalues.len())..].iter().sum();
        RateTerms {
            target_dim: k,
            tail: tail.max(0.0).sqrt(),
            private_pca: (k as f64 * d.powf(2.5) / (epsilon * n)).sqrt(),
            synthetic: (d / k as f64).sqrt() * (epsilon_subroutine * n).powf(-1.0 / k as f64),
        }
    }

    pub fn total(&self) -> f64 {
        self.tail + self.private_pca + self.synthetic
    }
}

/// `--target-dim auto`: argmin over 2 ≤ k ≤ d of the (E.1) criterion (d' = 1 when d = 1), with the
/// criterion at every k for the report. Ties go to the smaller k.
pub fn choose_target_dim(
    eigenvalues: &[f64],
    epsilon: f64,
    epsilon_subroutine: f64,
    n: f64,
) -> (usize, Vec<RateTerms>) {
    let dims = eigenvalues.len();
    if dims < 2 {
        return (
            dims,
            vec![RateTerms::at(
                eigenvalues,
                dims,
                epsilon,
                epsilon_subroutine,
                n,
            )],
        );
    }
    let scores: Vec<RateTerms> = (2..=dims)
        .map(|k| RateTerms::at(eigenvalues, k, epsilon, epsilon_subroutine, n))
        .collect();
    let best = scores
        .iter()
        .min_by(|a, b| a.total().total_cmp(&b.total()))
        .expect("d ≥ 2 gives at least one candidate");
    (best.target_dim, scores)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A symmetric matrix Q diag(λ) Qᵀ with a random orthogonal Q (Gram–Schmidt of a fixed matrix).
    fn with_spectrum(eigenvalues: &[f64]) -> Vec<f64> {
        let d = eigenvalues.len();
        let mut state = 0x1234_5678_9abc_def1u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        let mut q: Vec<Vec<f64>> = (0..d).map(|_| (0..d).map(|_| next()).collect()).collect();
        for i in 0..d {
            for j in 0..i {
                let (done, rest) = q.split_at_mut(i);
                let dot: f64 = rest[0].iter().zip(&done[j]).map(|(a, b)| a * b).sum();
                for (x, y) in rest[0].iter_mut().zip(&done[j]) {
                    *x -= dot * y;
                }
            }
            let norm = q[i].iter().map(|x| x * x).sum::<f64>().sqrt();
            q[i].iter_mut().for_each(|x| *x /= norm);
        }
        let mut matrix = vec![0.0; d * d];
        for i in 0..d {
            for j in 0..d {
                matrix[i * d + j] = (0..d).map(|k| q[k][i] * eigenvalues[k] * q[k][j]).sum();
            }
        }
        matrix
    }

    #[test]
    fn eigenvalues_come_largest_algebraic_first_with_orthonormal_vectors() {
        // Negative eigenvalues of large magnitude must come last, not first.
        let spectrum_in = [0.3, -5.0, 2.0, 0.0, -0.1, 1.0];
        let d = spectrum_in.len();
        let matrix = with_spectrum(&spectrum_in);
        let spectrum = Spectrum::of_symmetric(&matrix, d).unwrap();
        let expected = [2.0, 1.0, 0.3, 0.0, -0.1, -5.0];
        for (got, want) in spectrum.eigenvalues.iter().zip(expected) {
            assert!((got - want).abs() < 1e-10, "{:?}", spectrum.eigenvalues);
        }
        let basis = spectrum.top_vectors(3);
        assert_eq!((basis.nrows(), basis.ncols()), (d, 3));
        for a in 0..3 {
            for b in 0..3 {
                let dot: f64 = (0..d).map(|k| basis[(k, a)] * basis[(k, b)]).sum();
                assert!(
                    (dot - f64::from(a == b)).abs() < 1e-10,
                    "columns {a},{b}: {dot}"
                );
            }
            // M v = λ v for the column's eigenvalue.
            for row in 0..d {
                let mv: f64 = (0..d).map(|k| matrix[row * d + k] * basis[(k, a)]).sum();
                assert!((mv - expected[a] * basis[(row, a)]).abs() < 1e-9);
            }
        }
    }

    #[test]
    fn auto_dimension_finds_a_clear_gap_and_ignores_negative_tails() {
        // Four strong directions, then noise of both signs: the tail term vanishes at k = 4.
        let mut eigenvalues = vec![0.9, 0.8, 0.7, 0.6];
        eigenvalues.extend([1e-5, -1e-5, 2e-6, -3e-6, 0.0, -1e-6]);
        let (k, scores) = choose_target_dim(&eigenvalues, 100.0, 30.0, 1e9);
        assert_eq!(k, 4, "{scores:?}");
        assert_eq!(scores.len(), eigenvalues.len() - 1);
        assert!(scores.iter().all(|score| score.tail >= 0.0));
        // Little data: the synthetic-data term dominates and favours few dimensions.
        let (small, _) = choose_target_dim(&eigenvalues, 1.0, 0.3, 100.0);
        assert_eq!(small, 2);
        assert_eq!(choose_target_dim(&[0.5], 1.0, 0.3, 100.0).0, 1);
    }
}
