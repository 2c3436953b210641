//! Reading and writing tables: the Parquet source (a file or a dataset, positioned reads) and the atomic Parquet sink.

pub mod domain;
pub mod integer_cells;
pub mod paths;
pub mod sink;
pub mod source;
pub mod staging;
