//! Mechanisms: from a private leaf histogram to released, consistent leaf counts.

pub mod lowdim;
pub mod pmm;
pub mod psmm;
