//! Reading and writing tables: the memory-mapped Parquet source and the atomic Parquet sink.

pub mod paths;
pub mod sink;
pub mod source;
pub mod staging;
