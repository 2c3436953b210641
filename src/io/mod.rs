//! Reading and writing tables: the memory-mapped Parquet source and the atomic Parquet sink.

pub mod sink;
pub mod source;
