//! SpectralNetPartition (paper §3.2–3.4; note §1.1): the top-t eigenvectors U of a second moment (the
//! exact S for Algorithm 1, the released S + R for Algorithm 2), the lattice α-net of the unit ball of
//! R^t mapped into ran(UUᵀ) by U, and each row's nearest net point: argmin_j ‖U c_j − x̃‖ =
//! argmin_j ‖c_j − Uᵀx̃‖, so the search runs in t dimensions. The cell of a row depends only on the row
//! and on the matrix the subspace came from.

use rayon::prelude::*;

use super::moments::project_chunk;
use super::net::LatticeNet;
use crate::encoding::read::BitRows;
use crate::error::Result;
use crate::mechanism::lowdim::basis::Spectrum;

pub struct SpectralPartition {
    pub bits: usize,
    pub t: usize,
    /// U, p×t row-major: column k is the eigenvector of the k-th largest (algebraic) eigenvalue.
    pub basis: Vec<f64>,
    /// Every eigenvalue of the matrix, descending.
    #[cfg(test)]
    pub eigenvalues: Vec<f64>,
    pub net: LatticeNet,
}

/// Each row's cell, and its first projected coordinate (Algorithm 1's order inside a cell), per chunk.
pub struct Cells {
    pub cells: Vec<Vec<u32>>,
    pub lead: Vec<Vec<f64>>,
}

impl SpectralPartition {
    /// The partition by `net` in the top-`net.t` eigenspace of the symmetric p×p `matrix` (row-major).
    pub fn new(matrix: &[f64], bits: usize, net: LatticeNet) -> Result<Self> {
        let t = net.t;
        let spectrum = Spectrum::of_symmetric(matrix, bits)?;
        let top = spectrum.top_vectors(t);
        let basis = (0..bits * t).map(|index| top[(index / t, index % t)]).collect();
        Ok(SpectralPartition {
            bits,
            t,
            basis,
            #[cfg(test)]
            eigenvalues: spectrum.eigenvalues,
            net,
        })
    }

    /// The cells of every row (chunks in parallel).
    pub fn assign(&self, rows: &BitRows) -> Cells {
        let (cells, lead) = rows
            .chunks
            .par_iter()
            .map(|chunk| {
                let projected = project_chunk(chunk, self.bits, &self.basis, self.t);
                let t = self.t.max(1);
                let cells: Vec<u32> = (0..chunk.rows)
                    .map(|row| self.net.nearest(&projected[row * self.t..(row + 1) * self.t]))
                    .collect();
                let lead: Vec<f64> = if self.t == 0 {
                    vec![0.0; chunk.rows]
                } else {
                    projected.iter().step_by(t).copied().collect()
                };
                (cells, lead)
            })
            .unzip();
        Cells { cells, lead }
    }

    /// The t-dimensional coordinates Uᵀx̃ of one 0/1 row (tests).
    #[cfg(test)]
    pub fn project(&self, row: &[u8]) -> Vec<f64> {
        let scale = 1.0 / (self.bits as f64).sqrt();
        (0..self.t)
            .map(|k| {
                row.iter()
                    .enumerate()
                    .map(|(bit, &value)| f64::from(value) * self.basis[bit * self.t + k] * scale)
                    .sum()
            })
            .collect()
    }
}
