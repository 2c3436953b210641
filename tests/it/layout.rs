//! The source's layout: the files a new mechanism touches outside its own folder (docs/design.md, "How to
//! add a mechanism", lists them), and the mechanisms kept below the command-line layer.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The files outside a mechanism's folder that a mechanism is named in where the code dispatches on it:
/// what adding one touches besides its folder.
const DISPATCH_FILES: [&str; 6] = [
    "src/cluster/driver.rs",
    "src/mechanism/args.rs",
    "src/mechanism/mod.rs",
    "src/mechanism/options.rs",
    "src/options.rs",
    "src/privacy/streams.rs",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, in path order.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// A source file's code: its unit tests (the `#[cfg(test)]` module at its end) and its comments left out.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap();
    text.lines().map(|line| line.split("//").next().unwrap()).collect::<Vec<_>>().join("\n")
}

/// Whether `code` has `word` with no identifier character on either side.
fn names(code: &str, word: &str) -> bool {
    let is_identifier = |c: char| c.is_alphanumeric() || c == '_';
    code.match_indices(word).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + word.len()..].chars().next();
        !before.is_some_and(is_identifier) && !after.is_some_and(is_identifier)
    })
}

/// The files of src/ outside `src/mechanism/{folder}/` whose code dispatches on the mechanism whose types
/// are spelt `type_name` (`Psmm`): the enums over every mechanism, its flags' struct, its noise streams.
fn files_naming(folder: &str, type_name: &str) -> BTreeSet<String> {
    let own = root().join("src/mechanism").join(folder);
    let words: Vec<String> = ["Mechanism", "MechanismOptions", "Plan", "MechanismParameters"]
        .iter()
        .map(|dispatch| format!("{dispatch}::{type_name}"))
        .chain([format!("{type_name}Args")])
        .collect();
    rust_files(&root().join("src"))
        .into_iter()
        .filter(|path| !path.starts_with(&own))
        .filter(|path| {
            let code = code(path);
            words.iter().any(|word| names(&code, word)) || code.contains(&format!("NoiseStream::{type_name}"))
        })
        .map(|path| path.strip_prefix(root()).unwrap().to_string_lossy().replace('\\', "/"))
        .collect()
}

/// The files docs/design.md's "How to add a mechanism" lists: its numbered items' first `path`.
fn files_in_design_doc() -> BTreeSet<String> {
    let design = std::fs::read_to_string(root().join("docs/design.md")).unwrap();
    let section = design.split("\n## How to add a mechanism\n").nth(1).expect("docs/design.md has the section");
    let section = section.split("\n## ").next().unwrap();
    section
        .lines()
        .filter_map(|line| {
            let (number, rest) = line.split_once(". `")?;
            number.chars().all(|c| c.is_ascii_digit()).then(|| rest.split('`').next().unwrap().to_string())
        })
        .collect()
}

#[test]
fn a_new_mechanism_touches_the_files_the_design_doc_lists() {
    let expected: BTreeSet<String> = DISPATCH_FILES.iter().map(|file| file.to_string()).collect();
    assert_eq!(files_naming("psmm", "Psmm"), expected, "the files outside src/mechanism/psmm/ that name psmm");
    assert_eq!(files_in_design_doc(), expected, "docs/design.md, \"How to add a mechanism\"");
}

#[test]
fn the_mechanisms_do_not_import_the_command_line_layer() {
    for path in rust_files(&root().join("src/mechanism")) {
        let code = code(&path);
        for layer in ["crate::options", "crate::synth", "crate::cli", "crate::config"] {
            assert!(!code.contains(layer), "{} imports {layer}", path.display());
        }
    }
    assert!(!code(&root().join("src/options.rs")).contains("crate::synth"), "options imports synth");
}
