//! Config files: a TOML file of options, each under its flag's name (`epsilon = 1`, `root-share = 0.1`,
//! `neighbours = "replace"`), bounds in a `[bounds]` table (`column = [lo, hi]`), public category lists in
//! a `[categories]` table (`carrier = ["AA", "B6"]`). The file is read as extra
//! command-line arguments placed before the real ones, so every option is declared once (as a flag) and
//! parsed, validated and documented once; an option given on the command line wins over the file's.

use std::ffi::OsString;
use std::io::Read;
use std::path::Path;

use clap::parser::ValueSource;
use clap::{ArgMatches, Command};

use crate::error::{Error, Result};

/// Config keys that are no longer flags, with what replaced them.
const DEPRECATED_MEMORY_LIMIT: &str = "memory-limit";

/// The arguments that `path`'s keys stand for, for the subcommand `target` whose command line parsed to
/// `given`. Keys of `tolerated` that `target` lacks are skipped (`eval` reads a `synth` config file and
/// uses only its columns, bounds, nulls, threads and quiet); any other unknown key is an error.
pub fn config_arguments(
    path: &Path,
    target: &Command,
    given: &ArgMatches,
    tolerated: Option<&Command>,
) -> Result<Vec<OsString>> {
    let text = read_config_text(path)?;
    let table: toml::Table = toml::from_str(&text).map_err(|error| {
        Error::in_file(path, format!("invalid config file: {}", describe_toml_error(&text, &error)))
    })?;
    let invalid = |key: &str, reason: &str| Error::in_file(path, format!("invalid config file: key '{key}': {reason}"));
    let mut arguments = Vec::new();
    for (key, value) in &table {
        if NOT_CONFIG_KEYS.contains(&key.as_str()) {
            return Err(invalid(key, "not a setting of a run: the command-line flag of that name has no config key"));
        }
        let (key, value) = match key.as_str() {
            DEPRECATED_MEMORY_LIMIT => {
                let bytes = value
                    .as_integer()
                    .filter(|&bytes| bytes > 0)
                    .ok_or_else(|| invalid(key, "expected a positive number of bytes"))?;
                let mib = (bytes as u64).div_ceil(1 << 20);
                eprintln!(
                    "warning: {}: config key 'memory-limit' (bytes) is deprecated; use 'memory-limit-mib = {mib}' \
                     (read as {mib} MiB)",
                    path.display()
                );
                ("memory-limit-mib", toml::Value::Integer(mib as i64))
            }
            _ => (key.as_str(), value.clone()),
        };
        let Some(arg) = target.get_arguments().find(|arg| arg.get_long() == Some(key)) else {
            let known_elsewhere =
                tolerated.is_some_and(|other| other.get_arguments().any(|arg| arg.get_long() == Some(key)));
            if known_elsewhere {
                continue;
            }
            return Err(invalid(key, "unknown option (config keys are the flags' names)"));
        };
        let flag = format!("--{key}");
        if key == "bounds" {
            // Merged per column: the command line's bounds come later and win for the same column.
            let columns = value.as_table().ok_or_else(|| invalid(key, "expected a table of column = [lo, hi]"))?;
            for (column, range) in columns {
                let pair = range
                    .as_array()
                    .filter(|pair| pair.len() == 2)
                    .and_then(|pair| Some((bound(&pair[0])?, bound(&pair[1])?)))
                    .ok_or_else(|| {
                        invalid(key, &format!("column '{column}': expected [lo, hi] (two numbers, or two dates)"))
                    })?;
                let text = format!("{column}={}:{}", pair.0, pair.1);
                text.parse::<crate::geometry::bounds::ColumnBounds>()
                    .map_err(|error| invalid(key, &format!("column '{column}': {error}")))?;
                arguments.push(flag.clone().into());
                arguments.push(text.into());
            }
            continue;
        }
        if key == "categories" {
            // Public category lists: `[categories] carrier = ["AA", "B6"]`, one --categories per column
            // (a list given on the command line for the same column comes later and wins).
            let columns =
                value.as_table().ok_or_else(|| invalid(key, "expected a table of column = [\"category\", ...]"))?;
            for (column, list) in columns {
                let names = list
                    .as_array()
                    .and_then(|items| {
                        items.iter().map(|item| item.as_str().map(str::to_string)).collect::<Option<Vec<_>>>()
                    })
                    .filter(|names| !names.is_empty() && names.iter().all(|name| !name.contains(',')))
                    .ok_or_else(|| {
                        invalid(key, &format!("column '{column}': expected a non-empty list of strings without commas"))
                    })?;
                arguments.push(flag.clone().into());
                arguments.push(format!("{column}={}", names.join(",")).into());
            }
            continue;
        }
        if !arg.get_action().takes_values() {
            let set = value.as_bool().ok_or_else(|| invalid(key, "expected true or false"))?;
            if set && given.value_source(arg.get_id().as_str()) != Some(ValueSource::CommandLine) {
                arguments.push(flag.into());
            }
            continue;
        }
        let text = match &value {
            toml::Value::String(text) => text.clone(),
            toml::Value::Integer(number) => number.to_string(),
            toml::Value::Float(number) => number.to_string(),
            toml::Value::Array(items) => items
                .iter()
                .map(|item| match item {
                    toml::Value::String(text) => Ok(text.clone()),
                    _ => Err(invalid(key, "expected a list of strings")),
                })
                .collect::<Result<Vec<_>>>()?
                .join(","),
            _ => return Err(invalid(key, "expected a string, a number or a list")),
        };
        // Checked even where the command line sets the option too: a file with a bad value is a bad file,
        // whichever value wins this run.
        let alone = Command::new("config").no_binary_name(true).arg(arg.clone().required(false));
        alone.try_get_matches_from([format!("--{key}={text}")]).map_err(|error| {
            let reason = error.to_string();
            invalid(key, reason.lines().next().unwrap_or_default().trim_start_matches("error: "))
        })?;
        if given.value_source(arg.get_id().as_str()) == Some(ValueSource::CommandLine) {
            continue;
        }
        arguments.push(flag.into());
        arguments.push(text.into());
    }
    Ok(arguments)
}

/// Flags that are not settings of a run, so not config keys: the file itself, and clap's own.
const NOT_CONFIG_KEYS: [&str; 3] = ["config", "help", "version"];

/// Most bytes a config file may hold: a file of options is a few KiB; reading `/dev/zero` or a huge file
/// by mistake must end with a message, not with the machine's memory.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Characters of a bad line quoted in a message.
const QUOTED_CHARACTERS: usize = 80;

/// The config file's text, at most [`MAX_CONFIG_BYTES`].
fn read_config_text(path: &Path) -> Result<String> {
    let cannot = |error: std::io::Error| Error::in_file(path, format!("cannot read the config file: {error}"));
    let file = std::fs::File::open(path).map_err(cannot)?;
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1).read_to_end(&mut bytes).map_err(cannot)?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(Error::in_file(
            path,
            format!("the config file is larger than {} KiB: is it the right file?", MAX_CONFIG_BYTES >> 10),
        ));
    }
    String::from_utf8(bytes).map_err(|_| Error::in_file(path, "the config file is not UTF-8 text (TOML is)"))
}

/// A TOML error in a few words: its reason, line and column, and at most [`QUOTED_CHARACTERS`] of the
/// line (toml's own message quotes the whole line, however long).
fn describe_toml_error(text: &str, error: &toml::de::Error) -> String {
    let Some(span) = error.span() else {
        return error.message().to_string();
    };
    let before = &text[..span.start.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |at| at + 1);
    let column = before[line_start..].chars().count() + 1;
    let line_text = text[line_start..].lines().next().unwrap_or_default();
    let skipped = column.saturating_sub(QUOTED_CHARACTERS / 2);
    let excerpt: String = line_text.chars().skip(skipped).take(QUOTED_CHARACTERS).collect();
    let cut = line_text.chars().count() > skipped + QUOTED_CHARACTERS;
    format!(
        "line {line}, column {column}: {} (the line reads: {}{excerpt}{})",
        error.message().trim_end(),
        if skipped > 0 { "..." } else { "" },
        if cut { "..." } else { "" },
    )
}

/// One end of a `[bounds]` pair as `--bounds` reads it: a number, or a date or timestamp in a string
/// (`"2024-01-01"`); a TOML date-time value is read as its text.
fn bound(value: &toml::Value) -> Option<String> {
    match value {
        toml::Value::Float(number) => Some(number.to_string()),
        toml::Value::Integer(number) => Some(number.to_string()),
        toml::Value::String(text) => crate::geometry::bounds::parse_instant(text).map(|_| text.clone()),
        toml::Value::Datetime(instant) => Some(instant.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, ArgAction};

    fn command() -> Command {
        Command::new("synth")
            .arg(Arg::new("epsilon").long("epsilon"))
            .arg(Arg::new("bounds").long("bounds").action(ArgAction::Append))
            .arg(Arg::new("columns").long("columns"))
            .arg(Arg::new("memory_limit_mib").long("memory-limit-mib"))
            .arg(Arg::new("depth").long("depth").value_parser(clap::value_parser!(u32)))
            .arg(Arg::new("quiet").long("quiet").action(ArgAction::SetTrue))
            .arg(Arg::new("config").long("config"))
    }

    fn arguments(toml_text: &str, command_line: &[&str]) -> Result<Vec<String>> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.toml");
        std::fs::write(&path, toml_text).unwrap();
        let given = command().try_get_matches_from(command_line).unwrap();
        let tolerated = Command::new("other").arg(Arg::new("seed").long("seed"));
        config_arguments(&path, &command(), &given, Some(&tolerated))
            .map(|arguments| arguments.into_iter().map(|argument| argument.into_string().unwrap()).collect())
    }

    #[test]
    fn keys_become_flags_and_the_command_line_wins() {
        let got = arguments(
            "epsilon = 0.5\ncolumns = [\"a\", \"b\"]\nquiet = true\nseed = 3\n[bounds]\na = [0, 1.5]\n",
            &["synth", "--epsilon", "2"],
        )
        .unwrap();
        assert_eq!(
            got,
            ["--bounds", "a=0:1.5", "--columns", "a,b", "--quiet"],
            "epsilon is given on the command line; seed belongs to another subcommand"
        );
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_file_and_key() {
        let error = arguments("epsilonn = 1\n", &["synth"]).unwrap_err().to_string();
        assert!(error.contains("run.toml") && error.contains("'epsilonn'"), "{error}");
        let error = arguments("quiet = 3\n", &["synth"]).unwrap_err().to_string();
        assert!(error.contains("'quiet'"), "{error}");
        let error = arguments("[bounds]\na = [1]\n", &["synth"]).unwrap_err().to_string();
        assert!(error.contains("'a'"), "{error}");
        assert!(arguments("config = \"x.toml\"\n", &["synth"]).is_err());
    }

    #[test]
    fn every_value_is_checked_and_named_even_where_the_command_line_wins() {
        let error = arguments("depth = \"abc\"\n", &["synth", "--depth", "3"]).unwrap_err().to_string();
        assert!(error.contains("key 'depth'") && error.contains("abc"), "{error}");
        let error = arguments("depth = -1\n", &["synth"]).unwrap_err().to_string();
        assert!(error.contains("key 'depth'") && error.contains("-1"), "{error}");
        assert_eq!(arguments("depth = 7\n", &["synth"]).unwrap(), ["--depth", "7"]);
        let error = arguments("help = true\n", &["synth"]).unwrap_err().to_string();
        assert!(error.contains("key 'help'") && error.contains("not a setting"), "{error}");
    }

    #[test]
    fn a_huge_file_or_line_is_refused_in_a_short_message() {
        let huge = "x".repeat(MAX_CONFIG_BYTES as usize + 1);
        let error = arguments(&huge, &["synth"]).unwrap_err().to_string();
        assert!(error.contains("larger than 1024 KiB"), "{error}");
        let garbage = format!("epsilon = 1\n{}\n", "é".repeat(100_000));
        let error = arguments(&garbage, &["synth"]).unwrap_err().to_string();
        assert!(error.contains("line 2"), "{error}");
        assert!(error.len() < 1000, "the message quotes a short excerpt: {} bytes", error.len());
    }

    #[test]
    fn the_old_memory_limit_key_is_read_as_bytes_and_rounded_up_to_mib() {
        let got = arguments("memory-limit = 100\n", &["synth"]).unwrap();
        assert_eq!(got, ["--memory-limit-mib", "1"]);
        let got = arguments("memory-limit = 3221225472\n", &["synth"]).unwrap();
        assert_eq!(got, ["--memory-limit-mib", "3072"]);
    }
}
