//! The geometry every mechanism works in: public bounds and the map to [0,1]^d, the dyadic partition and
//! its cell codes, the regular grid of equal cubes, and the tree of counts over the dyadic partition.

pub mod bounds;
pub mod grid;
pub mod partition;
pub mod tree;
