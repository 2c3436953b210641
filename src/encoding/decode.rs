//! From fractional points back to rows of the input's columns and types.
//!
//! The paper rounds each coordinate of a point u ∈ [0,1]^p independently (Bernoulli(u_i)). That keeps
//! every product over distinct coordinates unbiased, but a one-hot block can come out with zero or
//! several bits set, which decodes to no single category. The rule here, data-independent and applied
//! to released points only (post-processing):
//!
//! - a single bit: Bernoulli(u_i), as in the paper;
//! - a one-hot block (categories, bins): ONE category drawn with probability u_j / Σ_block u (uniform
//!   when the block sums to 0). When the block sums to 1 (every microaggregated centroid does) this is
//!   exactly unbiased for every product across blocks, as independent rounding is; within a block the
//!   products are 0 in the data and in the output. Under covloss's noise the block sum drifts from 1 and
//!   the rule renormalises it, which is the cost measured by [`valid_under_independent_rounding`]
//!   (what the paper's rounding would have got right) and by `dpsynth eval`'s marginal errors;
//! - a binned number: its bin as above, then a uniform position inside the bin (integers rounded).

use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Float64Array, Int64Array, StringArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use rand::{Rng, RngExt};

use super::{ColumnEncoding, Encoding};
use crate::error::{Error, Result};

/// The output schema: the input's names and types, in schema order. A categorical column with an
/// "other" bit is nullable (the other category decodes to null).
pub fn output_schema(encoding: &Encoding) -> SchemaRef {
    Arc::new(Schema::new(
        encoding
            .columns
            .iter()
            .map(|column| {
                let nullable = matches!(column.encoding, ColumnEncoding::Categorical { other: true, .. });
                Field::new(column.name.clone(), column.data_type.clone(), nullable)
            })
            .collect::<Vec<_>>(),
    ))
}

/// The value of one column of one synthetic row: a bit, a category index (the list's length is
/// "other"), or a bin index.
pub type Code = u32;

/// Draws each column's code of one row from the point `point` (p coordinates in [0,1]).
pub fn draw_codes<R: Rng + ?Sized>(encoding: &Encoding, point: &[f64], rng: &mut R, codes: &mut [Code]) {
    for (column, code) in encoding.columns.iter().zip(codes.iter_mut()) {
        let block = &point[column.bits()];
        *code = if column.encoding.is_one_hot() {
            draw_category(block, rng)
        } else {
            u32::from(rng.random::<f64>() < block[0])
        };
    }
}

/// An index drawn with probability proportional to `weights` (all ≥ 0), uniform when they sum to 0.
pub fn draw_category<R: Rng + ?Sized>(weights: &[f64], rng: &mut R) -> Code {
    let total: f64 = weights.iter().sum();
    if total <= 0.0 {
        return rng.random_range(0..weights.len() as u32);
    }
    let mut target = rng.random::<f64>() * total;
    for (index, &weight) in weights.iter().enumerate() {
        if target < weight {
            return index as Code;
        }
        target -= weight;
    }
    // Floating-point leftovers land on the last category with positive weight.
    weights.iter().rposition(|&weight| weight > 0.0).unwrap_or(0) as Code
}

/// The probability that the paper's independent coordinate rounding of `block` sets exactly one bit:
/// Σ_j u_j Π_{l≠j} (1 − u_l). One minus it is the share of rows that rounding would leave undecodable.
pub fn valid_under_independent_rounding(block: &[f64]) -> f64 {
    (0..block.len())
        .map(|j| {
            block[j]
                * block
                    .iter()
                    .enumerate()
                    .filter(|&(l, _)| l != j)
                    .map(|(_, &u)| 1.0 - u)
                    .product::<f64>()
        })
        .sum()
}

/// A batch of rows, given per column as codes (`codes[column][row]`), in the input's types. Binned
/// values are placed uniformly in their bin with `rng`.
pub fn to_batch<R: Rng + ?Sized>(
    encoding: &Encoding,
    schema: &SchemaRef,
    codes: &[Vec<Code>],
    rng: &mut R,
) -> Result<RecordBatch> {
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(codes.len());
    for (column, codes) in encoding.columns.iter().zip(codes) {
        let decoded: ArrayRef = match &column.encoding {
            ColumnEncoding::Bit => {
                if column.data_type == DataType::Boolean {
                    Arc::new(BooleanArray::from_iter(codes.iter().map(|&code| Some(code == 1))))
                } else {
                    Arc::new(Int64Array::from_iter_values(codes.iter().map(|&code| i64::from(code))))
                }
            }
            ColumnEncoding::Categorical { categories, .. } => Arc::new(StringArray::from_iter(
                codes.iter().map(|&code| categories.get(code as usize).map(String::as_str)),
            )),
            ColumnEncoding::Binned { bounds, bins } => {
                let integer = !matches!(column.data_type, DataType::Float32 | DataType::Float64);
                let width = (bounds.hi - bounds.lo) / *bins as f64;
                Arc::new(Float64Array::from_iter_values(codes.iter().map(|&code| {
                    let value = bounds.lo + (f64::from(code) + rng.random::<f64>()) * width;
                    if integer {
                        value.round().clamp(bounds.lo.ceil(), bounds.hi.floor())
                    } else {
                        value.clamp(bounds.lo, bounds.hi)
                    }
                })))
            }
        };
        let typed = if decoded.data_type() == &column.data_type {
            decoded
        } else {
            cast(&decoded, &column.data_type).map_err(|error| {
                Error::internal(format!("decoding column '{}' to {}: {error}", column.name, column.data_type))
            })?
        };
        arrays.push(typed);
    }
    RecordBatch::try_new(schema.clone(), arrays)
        .map_err(|error| Error::internal(format!("building an output batch: {error}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn categories_are_drawn_in_proportion_to_the_block() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let weights = [0.1, 0.0, 0.6, 0.3];
        let mut counts = [0u32; 4];
        let draws = 200_000;
        for _ in 0..draws {
            counts[draw_category(&weights, &mut rng) as usize] += 1;
        }
        assert_eq!(counts[1], 0, "a zero weight is never drawn");
        for (count, weight) in counts.iter().zip(weights) {
            let share = f64::from(*count) / f64::from(draws);
            // 5 standard deviations of a binomial share at 200 000 draws.
            assert!((share - weight).abs() < 5.0 * (weight * (1.0 - weight) / f64::from(draws)).sqrt() + 1e-9);
        }
        // A block that sums to 0 (a clamped noisy centroid) is decoded uniformly.
        let mut zero_counts = [0u32; 3];
        for _ in 0..30_000 {
            zero_counts[draw_category(&[0.0; 3], &mut rng) as usize] += 1;
        }
        assert!(zero_counts.iter().all(|&count| (9_000..11_000).contains(&count)));
    }

    #[test]
    fn independent_rounding_validity_matches_its_formula() {
        // A one-hot point rounds validly always; the uniform block [½, ½] half of the time.
        assert_eq!(valid_under_independent_rounding(&[0.0, 1.0, 0.0]), 1.0);
        assert!((valid_under_independent_rounding(&[0.5, 0.5]) - 0.5).abs() < 1e-15);
        // Three thirds: 3 · (1/3)(2/3)^2 = 4/9.
        assert!((valid_under_independent_rounding(&[1.0 / 3.0; 3]) - 4.0 / 9.0).abs() < 1e-12);
    }
}
