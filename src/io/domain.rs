//! A column's public domain and its coding onto one numeric axis: how a categorical, Boolean or nullable
//! column enters the partition as a number, and how a released number comes back as the column's value
//! (docs/mechanisms/pmm.md, "Mixed columns"). Only public facts go in: the schema, the category lists,
//! the bounds. Category lists are never read from the data.
//!
//! - a number is itself, on its public bounds;
//! - a categorical column (string, dictionary or integer) is the index of its value in the public list, on
//!   [−½, K − ½]: cells hold whole categories, and the categories of a cell are neighbours in the list.
//!   With `--unlisted other` a value outside the list takes code K, which comes back as null;
//! - a Boolean column is 0 (false) or 1 (true);
//! - null, in a nullable column under `--nulls keep`, is one more value of the domain: code −1 for a coded
//!   column; for a number, a band below its lower bound (a fifteenth of the bounds' width, so the band is
//!   the first sixteenth of the axis and the first four halvings of the axis end on its edge). A released
//!   value below the lower bound comes back as null.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int64Array, StringArray};
use arrow::buffer::NullBuffer;
use arrow::compute::cast;
use arrow::datatypes::{DataType, Float64Type, Int64Type};

use crate::geometry::bounds::ColumnBounds;

/// What to do with a categorical value outside its public list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Unlisted {
    /// Stop with an error naming the column, row group and value.
    Error,
    /// Give the column one more category, "other"; it comes back as null.
    Other,
}

impl Unlisted {
    pub const DEFAULT: Unlisted = Unlisted::Error;
}

/// A public category list for one column.
#[derive(Clone, Debug, PartialEq)]
pub struct CategoryList {
    pub column: String,
    pub categories: Vec<String>,
}

impl std::str::FromStr for CategoryList {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        let (column, list) = text.split_once('=').ok_or_else(|| format!("expected COLUMN=V1,V2,..., got '{text}'"))?;
        let categories: Vec<String> = list.split(',').map(str::to_string).collect();
        if column.is_empty() || categories.iter().any(String::is_empty) {
            return Err(format!("expected COLUMN=V1,V2,... with no empty name, got '{text}'"));
        }
        let mut sorted = categories.clone();
        sorted.sort();
        sorted.dedup();
        if sorted.len() != categories.len() {
            return Err(format!("column '{column}': a category is listed twice"));
        }
        Ok(CategoryList { column: column.to_string(), categories })
    }
}

/// How a column's values become numbers on its axis.
#[derive(Clone, Debug, PartialEq)]
pub enum Coding {
    /// The column's own numbers.
    Number,
    /// The index of the value in a public list.
    Categories(Arc<Categories>),
    /// false 0, true 1.
    Boolean,
}

/// A public category list as the coding reads it: names (and their integers, for an integer column), and
/// whether unlisted values take the code after the list.
#[derive(Debug, PartialEq)]
pub struct Categories {
    pub names: Vec<String>,
    /// The names as integers, for a column of integer codes.
    integers: Option<Vec<i64>>,
    pub other: bool,
    /// The code of each name (string columns) or integer (integer columns), made once for every batch.
    name_codes: HashMap<String, f64>,
    integer_codes: HashMap<i64, f64>,
}

impl Categories {
    /// The list for a column of `data_type` (strings, a dictionary of strings, or integers, whose names must
    /// then be integers); `Err` says why the type cannot hold them.
    pub fn new(list: &CategoryList, other: bool, data_type: &DataType) -> std::result::Result<Self, String> {
        let integers = if is_integer_type(data_type) {
            let parsed = list
                .categories
                .iter()
                .map(|name| name.trim().parse::<i64>().map_err(|_| format!("category '{name}' is not an integer")))
                .collect::<std::result::Result<Vec<i64>, String>>()?;
            Some(parsed)
        } else if is_string_type(data_type) {
            if let DataType::Dictionary(keys, _) = data_type {
                let most = match keys.as_ref() {
                    DataType::Int8 => i8::MAX as usize + 1,
                    DataType::UInt8 => u8::MAX as usize + 1,
                    DataType::Int16 => i16::MAX as usize + 1,
                    DataType::UInt16 => u16::MAX as usize + 1,
                    _ => usize::MAX,
                };
                if list.categories.len() > most {
                    return Err(format!(
                        "type {data_type} holds at most {most} categories, the list has {}",
                        list.categories.len()
                    ));
                }
            }
            None
        } else {
            return Err(format!("type {data_type} cannot hold categories (string, dictionary or integer needed)"));
        };
        let name_codes = list.categories.iter().enumerate().map(|(code, name)| (name.clone(), code as f64)).collect();
        let integer_codes =
            integers.iter().flatten().enumerate().map(|(code, &integer)| (integer, code as f64)).collect();
        Ok(Categories { names: list.categories.clone(), integers, other, name_codes, integer_codes })
    }

    /// Codes 0..K: the listed categories, then "other" where there is one.
    pub fn codes(&self) -> usize {
        self.names.len() + usize::from(self.other)
    }
}

/// Where null goes on a nullable column's axis, under `--nulls keep`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NullSlot {
    /// The number a null is read as.
    pub value: f64,
    /// Released values below this come back as null.
    pub below: f64,
}

/// A column's domain on its axis: the bounds the partition cuts (the public bounds, widened by the null
/// band, or the codes' range) and where null goes.
#[derive(Clone, Debug, PartialEq)]
pub struct AxisDomain {
    pub bounds: ColumnBounds,
    pub nulls: Option<NullSlot>,
}

/// The axis of a coded column with `codes` codes (and code −1 for null when `nullable`).
pub fn coded_axis(column: &str, codes: usize, nullable: bool) -> AxisDomain {
    let first = if nullable { -1.0 } else { 0.0 };
    let bounds = ColumnBounds::new(column, first - 0.5, codes as f64 - 0.5).expect("at least one code");
    AxisDomain { bounds, nulls: nullable.then_some(NullSlot { value: -1.0, below: -0.5 }) }
}

/// The axis of a number on its public `bounds`: as they are, or widened below for the null band. An integer
/// column's band holds at least one integer, which null is read as.
pub fn number_axis(bounds: &ColumnBounds, integer: bool, nullable: bool) -> AxisDomain {
    if !nullable {
        return AxisDomain { bounds: bounds.clone(), nulls: None };
    }
    let width = bounds.hi - bounds.lo;
    let (lo, value) = if integer {
        let lo = bounds.lo.floor() - (width / 15.0).ceil().max(1.0);
        (lo, lo)
    } else {
        let band = width / 15.0;
        (bounds.lo - band, bounds.lo - band / 2.0)
    };
    let widened = ColumnBounds { lo, ..bounds.clone() };
    AxisDomain { bounds: widened, nulls: Some(NullSlot { value, below: bounds.lo }) }
}

/// A value the coding cannot read.
#[derive(Debug, PartialEq)]
pub enum Unreadable {
    /// Row `row` of the batch holds `value`, which is not in the list (under `--unlisted error`).
    Unlisted { row: usize, value: String },
    /// The array could not be cast to the type the coding reads.
    Cast(String),
}

/// The batch column `array` as numbers on its axis: the array itself for a number without nulls to code,
/// else float64 codes. A null the domain has no slot for stays null (the scan's `--nulls` policy then
/// decides).
pub fn code_values(
    coding: &Coding,
    nulls: Option<NullSlot>,
    array: &ArrayRef,
) -> std::result::Result<ArrayRef, Unreadable> {
    let cast_to = |to: &DataType| cast(array, to).map_err(|error| Unreadable::Cast(error.to_string()));
    let coded = |codes: Vec<f64>, valid: Option<NullBuffer>| -> ArrayRef {
        let values = Float64Array::new(codes.into(), if nulls.is_some() { None } else { valid });
        Arc::new(values)
    };
    let null_value = nulls.map_or(0.0, |slot| slot.value);
    match coding {
        Coding::Number => {
            let Some(slot) = nulls.filter(|_| array.null_count() > 0) else {
                return Ok(array.clone());
            };
            let values = cast_to(&DataType::Float64)?;
            let values = values.as_primitive::<Float64Type>();
            Ok(coded(values.iter().map(|value| value.unwrap_or(slot.value)).collect(), None))
        }
        Coding::Boolean => {
            let values = cast_to(&DataType::Boolean)?;
            let values = values.as_boolean();
            let codes = values.iter().map(|value| value.map_or(null_value, f64::from)).collect();
            Ok(coded(codes, values.nulls().cloned()))
        }
        Coding::Categories(categories) => {
            let other = categories.other.then_some(categories.names.len() as f64);
            let mut codes = Vec::with_capacity(array.len());
            if categories.integers.is_some() {
                let lookup = &categories.integer_codes;
                let values = cast_to(&DataType::Int64)?;
                let values = values.as_primitive::<Int64Type>();
                for (row, value) in values.iter().enumerate() {
                    codes.push(match value {
                        None => null_value,
                        Some(value) => lookup
                            .get(&value)
                            .copied()
                            .or(other)
                            .ok_or_else(|| Unreadable::Unlisted { row, value: value.to_string() })?,
                    });
                }
                return Ok(coded(codes, values.nulls().cloned()));
            }
            let lookup = &categories.name_codes;
            let values = cast_to(&DataType::Utf8)?;
            let values = values.as_string::<i32>();
            for (row, value) in values.iter().enumerate() {
                codes.push(match value {
                    None => null_value,
                    Some(value) => lookup
                        .get(value)
                        .copied()
                        .or(other)
                        .ok_or_else(|| Unreadable::Unlisted { row, value: value.to_string() })?,
                });
            }
            Ok(coded(codes, values.nulls().cloned()))
        }
    }
}

/// Released numbers on a coded column's axis (integers, once the sampler's integer cells placed them) back
/// as values of `data_type`: the listed category or Boolean of each code, null for the null code and for
/// "other".
pub fn decode_codes(coding: &Coding, data_type: &DataType, values: &[f64]) -> ArrayRef {
    match coding {
        Coding::Number => unreachable!("numbers are not coded"),
        Coding::Boolean => {
            Arc::new(values.iter().map(|&value| (value >= -0.5).then_some(value >= 0.5)).collect::<BooleanArray>())
        }
        Coding::Categories(categories) => {
            let listed = categories.names.len();
            let code = |value: f64| -> Option<usize> {
                let code = value.round();
                // Null below the list; "other" and noise beyond the last code come back as null.
                (code >= 0.0 && (code as usize) < listed).then_some(code as usize)
            };
            let array: ArrayRef = match &categories.integers {
                Some(integers) => {
                    Arc::new(values.iter().map(|&value| code(value).map(|code| integers[code])).collect::<Int64Array>())
                }
                None => Arc::new(
                    values
                        .iter()
                        .map(|&value| code(value).map(|code| categories.names[code].as_str()))
                        .collect::<StringArray>(),
                ),
            };
            cast(&array, data_type).expect("the input's own type holds its listed categories")
        }
    }
}

/// `array` with the rows whose released `values` lie below the null slot made null.
pub fn with_nulls(array: ArrayRef, slot: NullSlot, values: &[f64]) -> ArrayRef {
    let valid = NullBuffer::from_iter(values.iter().map(|&value| value >= slot.below));
    if valid.null_count() == 0 {
        return array;
    }
    let data = array.into_data().into_builder().nulls(Some(valid)).build().expect("same length");
    arrow::array::make_array(data)
}

/// Signed or unsigned integers.
pub fn is_integer_type(data_type: &DataType) -> bool {
    use DataType::*;
    matches!(data_type, Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64)
}

/// Strings, or a dictionary of them.
pub fn is_string_type(data_type: &DataType) -> bool {
    use DataType::*;
    match data_type {
        Utf8 | LargeUtf8 | Utf8View => true,
        Dictionary(_, values) => matches!(values.as_ref(), Utf8 | LargeUtf8 | Utf8View),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::Int32Type;

    fn list(text: &str) -> CategoryList {
        text.parse().unwrap()
    }

    #[test]
    fn string_categories_code_to_their_index_and_back() {
        let categories = Arc::new(Categories::new(&list("c=AA,B6,UA"), false, &DataType::Utf8).unwrap());
        let coding = Coding::Categories(categories.clone());
        let array: ArrayRef = Arc::new(StringArray::from(vec![Some("UA"), None, Some("AA")]));
        let slot = coded_axis("c", categories.codes(), true).nulls;
        let coded = code_values(&coding, slot, &array).unwrap();
        assert_eq!(coded.as_primitive::<Float64Type>().values().to_vec(), [2.0, -1.0, 0.0]);
        assert_eq!(coded.null_count(), 0);
        let back = decode_codes(&coding, &DataType::Utf8, &[2.0, -1.0, 0.0, 1.0]);
        let back: Vec<Option<&str>> = back.as_string::<i32>().iter().collect();
        assert_eq!(back, [Some("UA"), None, Some("AA"), Some("B6")]);
    }

    #[test]
    fn an_unlisted_value_is_refused_or_becomes_other_which_comes_back_null() {
        let array: ArrayRef = Arc::new(StringArray::from(vec!["AA", "ZZ"]));
        let strict = Coding::Categories(Arc::new(Categories::new(&list("c=AA,B6"), false, &DataType::Utf8).unwrap()));
        assert_eq!(
            code_values(&strict, None, &array).unwrap_err(),
            Unreadable::Unlisted { row: 1, value: "ZZ".to_string() }
        );
        let other = Coding::Categories(Arc::new(Categories::new(&list("c=AA,B6"), true, &DataType::Utf8).unwrap()));
        let coded = code_values(&other, None, &array).unwrap();
        assert_eq!(coded.as_primitive::<Float64Type>().values().to_vec(), [0.0, 2.0]);
        let back = decode_codes(&other, &DataType::Utf8, &[0.0, 2.0]);
        assert_eq!(back.as_string::<i32>().iter().collect::<Vec<_>>(), [Some("AA"), None]);
    }

    #[test]
    fn integer_and_dictionary_columns_keep_their_type() {
        let categories = Categories::new(&list("m=3,1,2"), false, &DataType::Int32).unwrap();
        let coding = Coding::Categories(Arc::new(categories));
        let array: ArrayRef = Arc::new(arrow::array::Int32Array::from(vec![1, 3]));
        let coded = code_values(&coding, None, &array).unwrap();
        assert_eq!(coded.as_primitive::<Float64Type>().values().to_vec(), [1.0, 0.0]);
        let back = decode_codes(&coding, &DataType::Int32, &[1.0, 0.0, 2.0]);
        assert_eq!(back.as_primitive::<Int32Type>().values().to_vec(), [1, 3, 2]);
        assert!(Categories::new(&list("m=x"), false, &DataType::Int32).is_err());
        let small = DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Utf8));
        let long: String = (0..200).map(|code| format!("c{code}")).collect::<Vec<_>>().join(",");
        assert!(Categories::new(&list(&format!("c={long}")), false, &small).is_err());
        assert!(Categories::new(&list("m=x"), false, &DataType::Float64).is_err());

        let dictionary = DataType::Dictionary(Box::new(DataType::Int16), Box::new(DataType::Utf8));
        let coding = Coding::Categories(Arc::new(Categories::new(&list("c=a,b"), false, &dictionary).unwrap()));
        let array = cast(&(Arc::new(StringArray::from(vec!["b", "a"])) as ArrayRef), &dictionary).unwrap();
        let coded = code_values(&coding, None, &array).unwrap();
        assert_eq!(coded.as_primitive::<Float64Type>().values().to_vec(), [1.0, 0.0]);
        assert_eq!(decode_codes(&coding, &dictionary, &[1.0]).data_type(), &dictionary);
    }

    #[test]
    fn booleans_and_their_nulls() {
        let array: ArrayRef = Arc::new(BooleanArray::from(vec![Some(true), None, Some(false)]));
        let slot = coded_axis("b", 2, true).nulls;
        let coded = code_values(&Coding::Boolean, slot, &array).unwrap();
        assert_eq!(coded.as_primitive::<Float64Type>().values().to_vec(), [1.0, -1.0, 0.0]);
        // Without a slot the null stays null, for the scan's --nulls policy.
        assert_eq!(code_values(&Coding::Boolean, None, &array).unwrap().null_count(), 1);
        let back = decode_codes(&Coding::Boolean, &DataType::Boolean, &[1.0, -1.0, 0.0]);
        assert_eq!(back.as_boolean().iter().collect::<Vec<_>>(), [Some(true), None, Some(false)]);
    }

    #[test]
    fn a_nullable_number_reads_null_in_its_band_below_the_bounds() {
        let bounds = ColumnBounds::new("x", 0.0, 15.0).unwrap();
        let float = number_axis(&bounds, false, true);
        assert_eq!((float.bounds.lo, float.bounds.hi), (-1.0, 15.0));
        let slot = float.nulls.unwrap();
        assert!(slot.value < 0.0 && slot.value > -1.0 && slot.below == 0.0);
        // The band is the first sixteenth of the axis.
        assert_eq!((0.0 - float.bounds.lo) / (float.bounds.hi - float.bounds.lo), 1.0 / 16.0);
        let integer = number_axis(&ColumnBounds::new("m", 1.0, 12.0).unwrap(), true, true);
        assert_eq!((integer.bounds.lo, integer.nulls.unwrap().value), (0.0, 0.0));
        assert_eq!(number_axis(&bounds, false, false).bounds, bounds);

        let array: ArrayRef = Arc::new(Float64Array::from(vec![Some(3.0), None]));
        let coded = code_values(&Coding::Number, Some(slot), &array).unwrap();
        assert_eq!(coded.as_primitive::<Float64Type>().values().to_vec(), [3.0, slot.value]);
        let released = [3.0, -0.5];
        let back = with_nulls(Arc::new(Float64Array::from(released.to_vec())), slot, &released);
        assert_eq!(back.as_primitive::<Float64Type>().iter().collect::<Vec<_>>(), [Some(3.0), None]);
    }
}
