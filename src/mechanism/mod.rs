//! Mechanisms: from a private leaf histogram to released, consistent leaf counts.

pub mod pmm;
pub mod psmm;
