//! The geometry every mechanism works in: public bounds and the map to [0,1]^d, the dyadic partition and
//! its cell codes, the regular grid of equal cubes, the tree of counts over the dyadic partition, and the
//! piecewise-linear CDFs of released marginals.

pub mod axis;
pub mod bounds;
pub mod cdf;
pub mod grid;
pub mod partition;
pub mod tree;
