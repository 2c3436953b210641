//! Reading the encoded columns into column-major bit planes: one pass over the mapped Parquet file,
//! row groups decoded in parallel, each batch packed 64 rows to a word per bit. The planes are what the
//! second moment counts with AND + popcount, and what cell assignment walks bit by bit.

use std::collections::HashMap;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Float64Type};
use rayon::prelude::*;

use super::{ColumnEncoding, EncodedColumn, Encoding};
use crate::error::{Error, Result};
use crate::io::source::Source;
use crate::progress::Progress;

/// Up to [`crate::io::source::BATCH_ROWS`] rows, column-major: bit b of row i is bit i % 64 of
/// `planes[b * words + i / 64]`. Bits past `rows` in the last word are zero.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BitChunk {
    pub rows: usize,
    pub words: usize,
    pub planes: Vec<u64>,
}

impl BitChunk {
    pub fn zeros(bits: usize, rows: usize) -> Self {
        let words = rows.div_ceil(64);
        BitChunk {
            rows,
            words,
            planes: vec![0; bits * words],
        }
    }

    /// The plane of bit `bit`.
    pub fn plane(&self, bit: usize) -> &[u64] {
        &self.planes[bit * self.words..(bit + 1) * self.words]
    }

    pub fn get(&self, bit: usize, row: usize) -> bool {
        self.planes[bit * self.words + row / 64] >> (row % 64) & 1 == 1
    }

    pub fn set(&mut self, bit: usize, row: usize) {
        self.planes[bit * self.words + row / 64] |= 1 << (row % 64);
    }
}

/// Every row of the input, encoded, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BitRows {
    pub bits: usize,
    pub chunks: Vec<BitChunk>,
}

impl BitRows {
    pub fn rows(&self) -> u64 {
        self.chunks.iter().map(|chunk| chunk.rows as u64).sum()
    }

    /// Rows given as 0/1 vectors (tests and small fixtures).
    pub fn from_rows(bits: usize, rows: &[Vec<u8>], chunk_rows: usize) -> Self {
        let chunks = rows
            .chunks(chunk_rows.max(1))
            .map(|block| {
                let mut chunk = BitChunk::zeros(bits, block.len());
                for (row, values) in block.iter().enumerate() {
                    assert_eq!(values.len(), bits);
                    for (bit, &value) in values.iter().enumerate() {
                        if value != 0 {
                            chunk.set(bit, row);
                        }
                    }
                }
                chunk
            })
            .collect();
        BitRows { bits, chunks }
    }

    /// Row `index` as 0/1 values (tests).
    pub fn row(&self, mut index: usize) -> Vec<u8> {
        for chunk in &self.chunks {
            if index < chunk.rows {
                return (0..self.bits).map(|bit| u8::from(chunk.get(bit, index))).collect();
            }
            index -= chunk.rows;
        }
        panic!("row out of range")
    }
}

/// Reads and encodes every row of `source`'s used columns (row groups in parallel, in file order).
pub fn read_bits(source: &Source, encoding: &Encoding, progress: &Progress) -> Result<BitRows> {
    let bar = progress.phase("encode", source.row_count(), "rows");
    let lookups: Vec<Option<HashMap<&str, usize>>> = encoding
        .columns
        .iter()
        .map(|column| match &column.encoding {
            ColumnEncoding::Categorical { categories, .. } => Some(
                categories
                    .iter()
                    .enumerate()
                    .map(|(index, name)| (name.as_str(), index))
                    .collect(),
            ),
            _ => None,
        })
        .collect();
    let per_group: Vec<Vec<BitChunk>> = (0..source.row_group_count())
        .into_par_iter()
        .map(|row_group| {
            let mut chunks = Vec::new();
            let reader = source.row_group_reader_of(
                row_group,
                encoding.columns.iter().map(|column| column.schema_index),
            )?;
            for batch in reader {
                let batch = batch.map_err(|error| {
                    let (file, group) = source.row_group_place(row_group);
                    Error::in_file(file, format!("row group {group}: {error}"))
                })?;
                let mut chunk = BitChunk::zeros(encoding.bits, batch.num_rows());
                for (position, column) in encoding.columns.iter().enumerate() {
                    let place = Place { source, column, row_group };
                    encode_column(&place, batch.column(position), lookups[position].as_ref(), &mut chunk)?;
                }
                bar.advance(batch.num_rows() as u64)?;
                chunks.push(chunk);
            }
            Ok(chunks)
        })
        .collect::<Result<_>>()?;
    bar.finish();
    Ok(BitRows {
        bits: encoding.bits,
        chunks: per_group.into_iter().flatten().collect(),
    })
}

/// Where a value was read, for error messages.
struct Place<'a> {
    source: &'a Source,
    column: &'a EncodedColumn,
    row_group: usize,
}

impl Place<'_> {
    fn error(&self, reason: impl std::fmt::Display) -> Error {
        let (file, group) = self.source.row_group_place(self.row_group);
        Error::in_column(file, &self.column.name, format!("row group {group}: {reason}"))
    }

    fn cast(&self, array: &ArrayRef, to: &DataType) -> Result<ArrayRef> {
        if array.null_count() > 0 {
            return Err(self.error(
                "has nulls; the covariance-loss mechanisms need every value (give nulls a category of their own first)",
            ));
        }
        cast(array, to).map_err(|error| self.error(format!("cannot read as {to}: {error}")))
    }
}

fn encode_column(
    place: &Place,
    array: &ArrayRef,
    lookup: Option<&HashMap<&str, usize>>,
    chunk: &mut BitChunk,
) -> Result<()> {
    let first = place.column.first_bit;
    match &place.column.encoding {
        ColumnEncoding::Bit => {
            // Through f64, exact for booleans, integers up to 2^53 and floats: only 0 and 1 pass.
            let values = place.cast(array, &DataType::Float64)?;
            for (row, &value) in values.as_primitive::<Float64Type>().values().iter().enumerate() {
                if value == 1.0 {
                    chunk.set(first, row);
                } else if value != 0.0 {
                    return Err(place.error(format!(
                        "value {value} is not a bit (0 or 1); give the column a category list or --bins"
                    )));
                }
            }
        }
        ColumnEncoding::Categorical { categories, other } => {
            let lookup = lookup.expect("categorical columns have a lookup");
            let values = place.cast(array, &DataType::Utf8)?;
            for (row, value) in values.as_string::<i32>().iter().enumerate() {
                let value = value.expect("nulls were refused");
                match lookup.get(value) {
                    Some(&index) => chunk.set(first + index, row),
                    None if *other => chunk.set(first + categories.len(), row),
                    None => {
                        return Err(place.error(format!(
                            "value '{value}' is not in the public category list (add it to the list, or use \
                             --unlisted other)"
                        )))
                    }
                }
            }
        }
        ColumnEncoding::Binned { bounds, bins } => {
            let values = place.cast(array, &DataType::Float64)?;
            for (row, &value) in values.as_primitive::<Float64Type>().values().iter().enumerate() {
                if value.is_nan() {
                    return Err(place.error("has NaN values"));
                }
                chunk.set(first + bin_of(value, bounds.lo, bounds.hi, *bins), row);
            }
        }
    }
    Ok(())
}

/// The bin of `value` among `bins` equal bins of [lo, hi], clamped to the end bins.
pub fn bin_of(value: f64, lo: f64, hi: f64, bins: usize) -> usize {
    let unit = ((value - lo) / (hi - lo)).clamp(0.0, 1.0);
    ((unit * bins as f64) as usize).min(bins - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_cover_the_bounds_and_clamp_outside() {
        assert_eq!(bin_of(-5.0, 0.0, 10.0, 5), 0);
        assert_eq!(bin_of(0.0, 0.0, 10.0, 5), 0);
        assert_eq!(bin_of(1.99, 0.0, 10.0, 5), 0);
        assert_eq!(bin_of(2.0, 0.0, 10.0, 5), 1);
        assert_eq!(bin_of(10.0, 0.0, 10.0, 5), 4);
        assert_eq!(bin_of(1e9, 0.0, 10.0, 5), 4);
    }

    #[test]
    fn rows_round_trip_through_bit_planes() {
        let rows: Vec<Vec<u8>> = (0..150u32)
            .map(|i| (0..5).map(|b| ((i * 7 + b * 3) % 4 == 0) as u8).collect())
            .collect();
        let packed = BitRows::from_rows(5, &rows, 70);
        assert_eq!(packed.rows(), 150);
        assert_eq!(packed.chunks.len(), 3);
        for (index, row) in rows.iter().enumerate() {
            assert_eq!(&packed.row(index), row);
        }
    }
}
