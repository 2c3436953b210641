//! Mechanisms: from private cell counts (or, for lowdim, private sums) to released cell counts.

pub mod lowdim;
pub mod pmm;
pub mod psmm;
