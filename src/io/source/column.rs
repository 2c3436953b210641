//! The numeric column types dpsynth reads and writes, and typed access to their values.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, PrimitiveArray};
use arrow::datatypes::*;

use crate::io::domain::{Coding, NullSlot};

/// How a column's values come back in the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnKind {
    /// float32/float64: written as floats.
    Float,
    /// Signed or unsigned integers, dates, timestamps, times of day and durations: integers in their unit.
    Integer,
}

impl ColumnKind {
    pub fn of(data_type: &DataType) -> Option<Self> {
        use DataType::*;
        match data_type {
            Float32 | Float64 => Some(ColumnKind::Float),
            Int8
            | Int16
            | Int32
            | Int64
            | UInt8
            | UInt16
            | UInt32
            | UInt64
            | Date32
            | Date64
            | Timestamp(_, _)
            | Time32(TimeUnit::Second | TimeUnit::Millisecond)
            | Time64(TimeUnit::Microsecond | TimeUnit::Nanosecond)
            | Duration(_) => Some(ColumnKind::Integer),
            _ => None,
        }
    }
}

/// A column of the input that the run reads onto one numeric axis: a number, or a categorical, Boolean or
/// nullable column coded as one ([`crate::io::domain`]).
#[derive(Clone, Debug, PartialEq)]
pub struct NumericColumn {
    pub name: String,
    /// Position in the file's schema (and so in the output).
    pub schema_index: usize,
    pub kind: ColumnKind,
    pub data_type: DataType,
    /// How the values become numbers ([`Coding::Number`] for a number).
    pub coding: Coding,
    /// Where null goes on the axis, when the domain keeps nulls.
    pub nulls: Option<NullSlot>,
}

impl NumericColumn {
    /// A number column of `data_type` at `schema_index`, without nulls in its domain.
    pub fn number(name: impl Into<String>, schema_index: usize, kind: ColumnKind, data_type: DataType) -> Self {
        NumericColumn { name: name.into(), schema_index, kind, data_type, coding: Coding::Number, nulls: None }
    }

    /// Whether the column is read as itself (a number whose nulls are not coded).
    pub fn is_plain_number(&self) -> bool {
        self.coding == Coding::Number && self.nulls.is_none()
    }
}

/// The values of one decoded column, in their native type (nulls are described by the array's bitmap).
pub enum NumericValues<'a> {
    F32(&'a [f32]),
    F64(&'a [f64]),
    I8(&'a [i8]),
    I16(&'a [i16]),
    I32(&'a [i32]),
    I64(&'a [i64]),
    U8(&'a [u8]),
    U16(&'a [u16]),
    U32(&'a [u32]),
    U64(&'a [u64]),
}

impl<'a> NumericValues<'a> {
    /// The values of a decoded array of a supported type (checked when the column was resolved).
    pub fn of(array: &'a dyn Array) -> Option<Self> {
        use DataType::*;
        Some(match array.data_type() {
            Float32 => NumericValues::F32(array.as_primitive::<Float32Type>().values()),
            Float64 => NumericValues::F64(array.as_primitive::<Float64Type>().values()),
            Int8 => NumericValues::I8(array.as_primitive::<Int8Type>().values()),
            Int16 => NumericValues::I16(array.as_primitive::<Int16Type>().values()),
            Int32 => NumericValues::I32(array.as_primitive::<Int32Type>().values()),
            Int64 => NumericValues::I64(array.as_primitive::<Int64Type>().values()),
            UInt8 => NumericValues::U8(array.as_primitive::<UInt8Type>().values()),
            UInt16 => NumericValues::U16(array.as_primitive::<UInt16Type>().values()),
            UInt32 => NumericValues::U32(array.as_primitive::<UInt32Type>().values()),
            UInt64 => NumericValues::U64(array.as_primitive::<UInt64Type>().values()),
            Date32 => NumericValues::I32(array.as_primitive::<Date32Type>().values()),
            Date64 => NumericValues::I64(array.as_primitive::<Date64Type>().values()),
            Timestamp(TimeUnit::Second, _) => NumericValues::I64(array.as_primitive::<TimestampSecondType>().values()),
            Timestamp(TimeUnit::Millisecond, _) => {
                NumericValues::I64(array.as_primitive::<TimestampMillisecondType>().values())
            }
            Timestamp(TimeUnit::Microsecond, _) => {
                NumericValues::I64(array.as_primitive::<TimestampMicrosecondType>().values())
            }
            Timestamp(TimeUnit::Nanosecond, _) => {
                NumericValues::I64(array.as_primitive::<TimestampNanosecondType>().values())
            }
            Time32(TimeUnit::Second) => NumericValues::I32(array.as_primitive::<Time32SecondType>().values()),
            Time32(TimeUnit::Millisecond) => NumericValues::I32(array.as_primitive::<Time32MillisecondType>().values()),
            Time64(TimeUnit::Microsecond) => NumericValues::I64(array.as_primitive::<Time64MicrosecondType>().values()),
            Time64(TimeUnit::Nanosecond) => NumericValues::I64(array.as_primitive::<Time64NanosecondType>().values()),
            Duration(TimeUnit::Second) => NumericValues::I64(array.as_primitive::<DurationSecondType>().values()),
            Duration(TimeUnit::Millisecond) => {
                NumericValues::I64(array.as_primitive::<DurationMillisecondType>().values())
            }
            Duration(TimeUnit::Microsecond) => {
                NumericValues::I64(array.as_primitive::<DurationMicrosecondType>().values())
            }
            Duration(TimeUnit::Nanosecond) => {
                NumericValues::I64(array.as_primitive::<DurationNanosecondType>().values())
            }
            _ => return None,
        })
    }
}

/// Builds an output array of `data_type` from `units`, mapped to the column's units by `to_column`,
/// in one pass. Integer types are rounded to nearest and saturate at the type's range (bounds inside
/// the range make that a no-op).
pub fn build_array(data_type: &DataType, units: &[f64], to_column: impl Fn(f64) -> f64) -> ArrayRef {
    macro_rules! build {
        ($arrow:ty, $cast:expr) => {
            PrimitiveArray::<$arrow>::from_iter_values(units.iter().map(|&unit| $cast(to_column(unit))))
        };
    }
    // `as` from f64 to an integer saturates, which is the behaviour we want after rounding.
    use DataType::*;
    match data_type {
        Float32 => Arc::new(build!(Float32Type, |v: f64| v as f32)),
        Float64 => Arc::new(build!(Float64Type, |v: f64| v)),
        Int8 => Arc::new(build!(Int8Type, |v: f64| v.round() as i8)),
        Int16 => Arc::new(build!(Int16Type, |v: f64| v.round() as i16)),
        Int32 => Arc::new(build!(Int32Type, |v: f64| v.round() as i32)),
        Int64 => Arc::new(build!(Int64Type, |v: f64| v.round() as i64)),
        UInt8 => Arc::new(build!(UInt8Type, |v: f64| v.round() as u8)),
        UInt16 => Arc::new(build!(UInt16Type, |v: f64| v.round() as u16)),
        UInt32 => Arc::new(build!(UInt32Type, |v: f64| v.round() as u32)),
        UInt64 => Arc::new(build!(UInt64Type, |v: f64| v.round() as u64)),
        Date32 => Arc::new(build!(Date32Type, |v: f64| v.round() as i32)),
        Date64 => Arc::new(build!(Date64Type, |v: f64| v.round() as i64)),
        Timestamp(TimeUnit::Second, zone) => {
            Arc::new(build!(TimestampSecondType, |v: f64| v.round() as i64).with_timezone_opt(zone.clone()))
        }
        Timestamp(TimeUnit::Millisecond, zone) => {
            Arc::new(build!(TimestampMillisecondType, |v: f64| v.round() as i64).with_timezone_opt(zone.clone()))
        }
        Timestamp(TimeUnit::Microsecond, zone) => {
            Arc::new(build!(TimestampMicrosecondType, |v: f64| v.round() as i64).with_timezone_opt(zone.clone()))
        }
        Timestamp(TimeUnit::Nanosecond, zone) => {
            Arc::new(build!(TimestampNanosecondType, |v: f64| v.round() as i64).with_timezone_opt(zone.clone()))
        }
        Time32(TimeUnit::Second) => Arc::new(build!(Time32SecondType, |v: f64| v.round() as i32)),
        Time32(TimeUnit::Millisecond) => Arc::new(build!(Time32MillisecondType, |v: f64| v.round() as i32)),
        Time64(TimeUnit::Microsecond) => Arc::new(build!(Time64MicrosecondType, |v: f64| v.round() as i64)),
        Time64(TimeUnit::Nanosecond) => Arc::new(build!(Time64NanosecondType, |v: f64| v.round() as i64)),
        Duration(TimeUnit::Second) => Arc::new(build!(DurationSecondType, |v: f64| v.round() as i64)),
        Duration(TimeUnit::Millisecond) => Arc::new(build!(DurationMillisecondType, |v: f64| v.round() as i64)),
        Duration(TimeUnit::Microsecond) => Arc::new(build!(DurationMicrosecondType, |v: f64| v.round() as i64)),
        Duration(TimeUnit::Nanosecond) => Arc::new(build!(DurationNanosecondType, |v: f64| v.round() as i64)),
        other => unreachable!("column type {other} was rejected when the column was resolved"),
    }
}

/// A native column value as f64 (integers beyond 2^53 round to the nearest f64).
pub trait AsF64: Copy {
    fn as_f64(self) -> f64;
}

macro_rules! as_f64 {
    ($($t:ty),*) => { $(impl AsF64 for $t { #[inline(always)] fn as_f64(self) -> f64 { self as f64 } })* };
}
as_f64!(f32, f64, i8, i16, i32, i64, u8, u16, u32, u64);

/// One value of a decoded numeric array as f64 (for error messages).
pub fn value_as_f64(array: &dyn Array, row: usize) -> f64 {
    match NumericValues::of(array) {
        Some(NumericValues::F32(values)) => values[row].as_f64(),
        Some(NumericValues::F64(values)) => values[row],
        Some(NumericValues::I8(values)) => values[row].as_f64(),
        Some(NumericValues::I16(values)) => values[row].as_f64(),
        Some(NumericValues::I32(values)) => values[row].as_f64(),
        Some(NumericValues::I64(values)) => values[row].as_f64(),
        Some(NumericValues::U8(values)) => values[row].as_f64(),
        Some(NumericValues::U16(values)) => values[row].as_f64(),
        Some(NumericValues::U32(values)) => values[row].as_f64(),
        Some(NumericValues::U64(values)) => values[row].as_f64(),
        None => f64::NAN,
    }
}
