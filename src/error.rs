//! One error type for the whole pipeline, split by who must act on it.
//!
//! `BadInput` is the user's to fix (exit code 2): it always names the file, column or option and the
//! reason. `Internal` is ours (exit code 1). No error path panics.

use std::fmt;
use std::path::Path;

/// Exit code for a run that finished normally.
pub const EXIT_OK: i32 = 0;
/// Exit code for an internal failure (a bug or an environment problem the user did not cause).
pub const EXIT_INTERNAL: i32 = 1;
/// Exit code for bad input or usage (the same code clap uses for usage errors).
pub const EXIT_BAD_INPUT: i32 = 2;
/// Exit code for a run stopped by SIGINT (the shell's 128 + 2).
pub const EXIT_INTERRUPTED: i32 = 130;

#[derive(Debug)]
pub enum Error {
    /// The user's input is wrong: file, column, option or value, with the reason.
    BadInput(String),
    /// The request would break the privacy guarantee (a budget, relation or policy that cannot hold):
    /// bad input too (exit code 2), named apart so library callers can tell it from a typo.
    Privacy(String),
    /// A library caller asked the run to stop ([`crate::progress::ProgressWatcher`]); nothing was written.
    Interrupted,
    /// Something failed that the user did not cause.
    Internal(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn bad_input(message: impl Into<String>) -> Self {
        Error::BadInput(message.into())
    }

    pub fn privacy(message: impl Into<String>) -> Self {
        Error::Privacy(message.into())
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Error::Internal(message.into())
    }

    /// A bad-input error about one file.
    pub fn in_file(path: &Path, reason: impl fmt::Display) -> Self {
        Error::BadInput(format!("{}: {reason}", path.display()))
    }

    /// A bad-input error about one column of one file.
    pub fn in_column(path: &Path, column: &str, reason: impl fmt::Display) -> Self {
        Error::BadInput(format!("{}: column '{column}': {reason}", path.display()))
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            Error::BadInput(_) | Error::Privacy(_) => EXIT_BAD_INPUT,
            Error::Interrupted => EXIT_INTERRUPTED,
            Error::Internal(_) => EXIT_INTERNAL,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::BadInput(message) | Error::Privacy(message) => write!(f, "{message}"),
            Error::Interrupted => write!(f, "interrupted; nothing was written"),
            Error::Internal(message) => write!(f, "internal error: {message}"),
        }
    }
}

impl std::error::Error for Error {}

/// A number for a message: plain when it reads well, in exponent form when tiny or huge (ε = 1e-300
/// would otherwise print 300 digits).
pub fn compact_number(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude != 0.0 && !(1e-4..1e15).contains(&magnitude) {
        format!("{value:e}")
    } else {
        format!("{value}")
    }
}
