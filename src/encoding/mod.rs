//! Boolean encoding of a table for the covariance-loss mechanisms (docs/mechanisms/covloss.md): every
//! used column becomes one bit or a one-hot block of bits, from **public** inputs only, and a synthetic
//! row in [0,1]^p decodes back to the input's column names and types.
//!
//! - a boolean column, or a numeric column holding only 0 and 1: one bit;
//! - a categorical column (string, dictionary or integer) with a public category list
//!   (`[categories] carrier = ["AA", "B6"]` in the config, or `--categories carrier=AA,B6`): one bit per
//!   listed category, plus an "other" bit with `--unlisted other` (a value outside the list is otherwise
//!   an error naming the column, the row group and the value). Category lists are never read from data;
//! - a numeric column with `--bins COLUMN=K` and public `--bounds`: K equal bins of the bounds, one-hot
//!   (values outside the bounds are clamped into the end bins, as every mechanism clamps).
//!
//! [`read`] decodes the columns row group by row group into column-major bit planes; [`decode`] turns
//! fractional points back into rows (see there for the rule that makes each one-hot block one value).

pub mod decode;
pub mod read;

use arrow::datatypes::DataType;

use crate::error::{Error, Result};
use crate::geometry::bounds::ColumnBounds;
use crate::io::source::{field_names, no_such_column, ColumnKind, Source};

// The public category lists and the unlisted rule are the columns' domains (io::domain), which the
// default mechanism reads too.
pub use crate::io::domain::{CategoryList, Unlisted};
use crate::io::domain::{is_integer_type, is_string_type};

/// `--bins COLUMN=K`: K equal bins of a numeric column's public bounds.
#[derive(Clone, Debug, PartialEq)]
pub struct BinCount {
    pub column: String,
    pub bins: usize,
}

impl std::str::FromStr for BinCount {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        let parsed = text
            .split_once('=')
            .and_then(|(column, bins)| Some((column, bins.parse::<usize>().ok()?)));
        match parsed {
            Some((column, bins)) if !column.is_empty() && bins >= 1 => Ok(BinCount {
                column: column.to_string(),
                bins,
            }),
            _ => Err(format!("expected COLUMN=K with K ≥ 1, got '{text}'")),
        }
    }
}

/// The public description of the encoding, as the options give it (no data, no schema).
#[derive(Clone, Debug, PartialEq)]
pub struct EncodingSpec {
    pub columns: Vec<String>,
    pub categories: Vec<CategoryList>,
    pub bins: Vec<BinCount>,
    /// Bounds of the binned columns.
    pub bounds: Vec<ColumnBounds>,
    pub unlisted: Unlisted,
}

/// How one column is encoded.
#[derive(Clone, Debug, PartialEq)]
pub enum ColumnEncoding {
    /// One bit (a boolean, or a numeric column holding only 0 and 1).
    Bit,
    /// One bit per listed category, plus an "other" bit when `other`.
    Categorical { categories: Vec<String>, other: bool },
    /// `bins` equal bins of the public bounds, one-hot.
    Binned { bounds: ColumnBounds, bins: usize },
}

impl ColumnEncoding {
    /// Bits of this column.
    pub fn width(&self) -> usize {
        match self {
            ColumnEncoding::Bit => 1,
            ColumnEncoding::Categorical { categories, other } => categories.len() + usize::from(*other),
            ColumnEncoding::Binned { bins, .. } => *bins,
        }
    }

    /// Whether exactly one bit of the block is set in every encoded row.
    pub fn is_one_hot(&self) -> bool {
        !matches!(self, ColumnEncoding::Bit)
    }

    pub fn describe(&self) -> String {
        match self {
            ColumnEncoding::Bit => "one bit (boolean or 0/1 number)".to_string(),
            ColumnEncoding::Categorical { categories, other } => format!(
                "one-hot over {} public categories{}",
                categories.len(),
                if *other { " plus an 'other' bit (decoded as null)" } else { "" }
            ),
            ColumnEncoding::Binned { bounds, bins } => format!(
                "one-hot over {bins} equal bins of the public bounds {}:{}",
                bounds.lo, bounds.hi
            ),
        }
    }
}

/// One used column: where it is in the file, its type, its encoding and its first bit.
#[derive(Clone, Debug, PartialEq)]
pub struct EncodedColumn {
    pub name: String,
    pub schema_index: usize,
    pub data_type: DataType,
    pub encoding: ColumnEncoding,
    pub first_bit: usize,
}

impl EncodedColumn {
    pub fn bits(&self) -> std::ops::Range<usize> {
        self.first_bit..self.first_bit + self.encoding.width()
    }
}

/// The columns of a run, in schema order, and their p bits in total.
#[derive(Clone, Debug, PartialEq)]
pub struct Encoding {
    pub columns: Vec<EncodedColumn>,
    pub bits: usize,
}

/// At most this many bits: the second moment is p×p and the exact-count arithmetic is sized for it.
pub const MAX_BITS: usize = 4096;

impl Encoding {
    /// The encoding of `spec` on `source`'s schema (names and types only: public metadata, never values).
    pub fn resolve(source: &Source, spec: &EncodingSpec) -> Result<Encoding> {
        let schema = source.schema();
        let path = source.path();
        for bins in &spec.bins {
            if !spec.columns.contains(&bins.column) {
                return Err(Error::bad_input(format!(
                    "--bins names column '{}', which is not among the used --columns",
                    bins.column
                )));
            }
        }
        let mut columns = Vec::with_capacity(spec.columns.len());
        for name in &spec.columns {
            let index =
                schema.index_of(name).map_err(|_| Error::in_column(path, name, no_such_column(name, &field_names(schema), "")))?;
            if columns.iter().any(|column: &EncodedColumn| column.schema_index == index) {
                return Err(Error::in_column(path, name, "named twice"));
            }
            let data_type = schema.field(index).data_type().clone();
            let categories = spec.categories.iter().find(|list| &list.column == name);
            let bins = spec.bins.iter().find(|bins| &bins.column == name);
            let encoding = match (categories, bins) {
                (Some(_), Some(_)) => {
                    return Err(Error::in_column(path, name, "has both --categories and --bins"))
                }
                (Some(list), None) => {
                    if !is_categorical_type(&data_type) {
                        return Err(Error::in_column(
                            path,
                            name,
                            format!("type {data_type} cannot hold categories (string, dictionary or integer needed)"),
                        ));
                    }
                    ColumnEncoding::Categorical {
                        categories: list.categories.clone(),
                        other: spec.unlisted == Unlisted::Other,
                    }
                }
                (None, Some(bins)) => {
                    if !is_plain_number(&data_type) {
                        return Err(Error::in_column(
                            path,
                            name,
                            format!("--bins needs an integer or float column, the type is {data_type}"),
                        ));
                    }
                    let bounds = spec
                        .bounds
                        .iter()
                        .rev()
                        .find(|bounds| &bounds.column == name)
                        .cloned()
                        .ok_or_else(|| {
                            Error::bad_input(format!(
                                "column '{name}' has --bins but no public bounds: give --bounds {name}=LO:HI"
                            ))
                        })?;
                    ColumnEncoding::Binned { bounds, bins: bins.bins }
                }
                (None, None) => {
                    if !(data_type == DataType::Boolean || is_plain_number(&data_type)) {
                        return Err(Error::in_column(
                            path,
                            name,
                            format!(
                                "type {data_type} is not a bit: give it a public category list \
                                 (--categories {name}=A,B,... or [categories] in the config) or, if numeric, \
                                 --bins {name}=K with --bounds"
                            ),
                        ));
                    }
                    ColumnEncoding::Bit
                }
            };
            columns.push(EncodedColumn {
                name: name.clone(),
                schema_index: index,
                data_type,
                encoding,
                first_bit: 0,
            });
        }
        if columns.is_empty() {
            return Err(Error::bad_input(
                "no columns: give --columns (bits, categorical columns with --categories, binned numeric columns with --bins)",
            ));
        }
        columns.sort_by_key(|column| column.schema_index);
        let mut bits = 0;
        for column in &mut columns {
            column.first_bit = bits;
            bits += column.encoding.width();
        }
        if bits > MAX_BITS {
            return Err(Error::bad_input(format!(
                "the encoding has {bits} bits, more than the {MAX_BITS} the covariance-loss mechanisms support"
            )));
        }
        Ok(Encoding { columns, bits })
    }

    /// The one-hot blocks (bit ranges whose bits sum to one in every encoded row).
    pub fn one_hot_blocks(&self) -> Vec<std::ops::Range<usize>> {
        self.columns
            .iter()
            .filter(|column| column.encoding.is_one_hot())
            .map(EncodedColumn::bits)
            .collect()
    }
}

/// Integers and floats (not dates or timestamps: their values do not decode back through a float).
fn is_plain_number(data_type: &DataType) -> bool {
    is_integer_type(data_type) || ColumnKind::of(data_type) == Some(ColumnKind::Float)
}

fn is_categorical_type(data_type: &DataType) -> bool {
    is_string_type(data_type) || is_integer_type(data_type)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn category_lists_and_bin_counts_parse_and_refuse_bad_text() {
        let list: CategoryList = "carrier=AA,B6,UA".parse().unwrap();
        assert_eq!(list.column, "carrier");
        assert_eq!(list.categories, ["AA", "B6", "UA"]);
        assert!("carrier=AA,,UA".parse::<CategoryList>().is_err());
        assert!("carrier=AA,AA".parse::<CategoryList>().is_err());
        assert!("AA,B6".parse::<CategoryList>().is_err());
        let bins: BinCount = "distance=8".parse().unwrap();
        assert_eq!((bins.column.as_str(), bins.bins), ("distance", 8));
        assert!("distance=0".parse::<BinCount>().is_err());
        assert!("distance".parse::<BinCount>().is_err());
    }
}
