//! Distances between a real and a synthetic table.

pub mod w1;
