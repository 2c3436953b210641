//! Seeded random cases for the unit tests: one home for the generators that several tests draw from, so
//! that each draws its cases the same way and a failure names a seed that reproduces it.

use rand::{Rng, RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// The generator of a test's cases: the same seed gives the same cases on any machine.
pub(crate) fn case_rng(seed: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(seed)
}

/// A uniform index below `n`.
pub(crate) fn below(rng: &mut Xoshiro256PlusPlus, n: usize) -> usize {
    (rng.next_u64() % n as u64) as usize
}

/// `n` points of [0, 1]^dims, row-major, with the cases that break geometric code: one coordinate in ten
/// exactly 0, one in ten exactly 1, and, in one call of three, the others on the coarse lattice
/// {0, 1/4, …, 1} (exact ties) instead of uniform.
pub(crate) fn unit_points(rng: &mut Xoshiro256PlusPlus, n: usize, dims: usize) -> Vec<f64> {
    let lattice = below(rng, 3) == 0;
    (0..n * dims)
        .map(|_| match below(rng, 10) {
            0 => 0.0,
            1 => 1.0,
            _ if lattice => below(rng, 5) as f64 / 4.0,
            _ => (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64,
        })
        .collect()
}

/// `count` points whose coordinates are on {0, 1/steps, …, 1}: many exact distance ties and duplicates.
pub(crate) fn lattice_points(rng: &mut Xoshiro256PlusPlus, count: usize, dims: usize, steps: u32) -> Vec<f64> {
    (0..count * dims).map(|_| f64::from(rng.random_range(0..=steps)) / f64::from(steps)).collect()
}

/// `rows` Boolean rows of `bits` independent bits, each 1 with probability `p`.
pub(crate) fn bit_rows(rng: &mut Xoshiro256PlusPlus, rows: usize, bits: usize, p: f64) -> Vec<Vec<u8>> {
    (0..rows).map(|_| (0..bits).map(|_| u8::from(rng.random::<f64>() < p)).collect()).collect()
}

/// The public inputs of a plan over `dims` columns with room to spare: 1 GiB of cells, one thread, points
/// spread uniformly in their cells.
pub(crate) fn public_inputs(
    dims: usize,
    epsilon: f64,
    neighbours: crate::privacy::Neighbours,
    file_rows: u64,
) -> crate::mechanism::PublicInputs<'static> {
    crate::mechanism::PublicInputs {
        dims,
        epsilon,
        neighbours,
        file_rows,
        memory_limit: 1 << 30,
        threads: 1,
        placement: crate::sampler::Placement::Uniform,
        encoding: None,
    }
}
