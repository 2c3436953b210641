//! The documentation as a newcomer meets it: a README that starts small, links that stay inside the
//! repository and resolve, and no development-history labels in the code or the docs (history is
//! CHANGELOG.md's, by date).

use std::path::{Component, Path, PathBuf};

/// README.md's most lines: what it does, the two commands, one worked example and pointers into docs/.
const README_MAX_LINES: usize = 250;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn files_under(folder: &Path, extension: &str, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(folder).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_under(&path, extension, files);
        } else if path.extension().is_some_and(|found| found == extension) {
            files.push(path);
        }
    }
}

/// README.md, CHANGELOG.md and every Markdown page under docs/.
fn markdown_files() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md"), root().join("CHANGELOG.md")];
    files_under(&root().join("docs"), "md", &mut files);
    files
}

/// The text outside fenced code blocks, line numbers kept.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            lines.push((index + 1, line));
        }
    }
    lines
}

/// The targets of the Markdown links `[text](target)` on a line.
fn link_targets(line: &str) -> Vec<&str> {
    line.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &line[at + 2..];
            let end = rest.find(')')?;
            rest[..end].split_whitespace().next()
        })
        .collect()
}

/// `path` with `.` and `..` folded, without touching the file system.
fn folded(path: &Path) -> PathBuf {
    let mut parts: Vec<Component> = Vec::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir if matches!(parts.last(), Some(Component::Normal(_))) => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts.iter().collect()
}

#[test]
fn the_readme_starts_small() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines; move detail into docs/ (at most {README_MAX_LINES})"
    );
    for command in ["cargo run --release -- synth datasets/flights.parquet", "scripts/test.sh"] {
        assert!(readme.contains(command), "README.md gives the quick-start command '{command}'");
    }
}

#[test]
fn every_link_stays_in_the_repository_and_resolves() {
    let mut bad = Vec::new();
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.strip_prefix(root()).unwrap().display().to_string();
        for (number, line) in prose(&text) {
            for target in link_targets(line) {
                let path = target.split('#').next().unwrap();
                if target.contains("://") || target.starts_with("mailto:") {
                    bad.push(format!("{name}:{number}: leaves the repository: {target}"));
                } else if !path.is_empty() {
                    let resolved = folded(&file.parent().unwrap().join(path));
                    if !resolved.starts_with(root()) || !resolved.exists() {
                        bad.push(format!("{name}:{number}: resolves to nothing in the repository: {target}"));
                    }
                }
            }
        }
    }
    assert!(bad.is_empty(), "bad links:\n{}", bad.join("\n"));
}

/// "session 12", "Sessions 3–5": labels of how the work was organised, which mean nothing to a reader.
fn history_labels(text: &str) -> Vec<usize> {
    let lower = text.to_lowercase();
    lower
        .lines()
        .enumerate()
        .filter(|(_, line)| {
            line.match_indices("session").any(|(at, word)| {
                let after = line[at + word.len()..].trim_start_matches('s').trim_start();
                after.starts_with(|c: char| c.is_ascii_digit())
            })
        })
        .map(|(index, _)| index + 1)
        .collect()
}

#[test]
fn code_and_docs_carry_no_development_history_labels() {
    let mut files = Vec::new();
    files_under(&root().join("src"), "rs", &mut files);
    files_under(&root().join("docs"), "md", &mut files);
    files.push(root().join("README.md"));
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for line in history_labels(&text) {
            found.push(format!("{}:{line}", file.strip_prefix(root()).unwrap().display()));
        }
    }
    assert!(found.is_empty(), "development-history labels (history goes to CHANGELOG.md):\n{}", found.join("\n"));
}

#[test]
fn the_checks_see_what_they_look_for() {
    assert_eq!(history_labels("fine\nmeasured in Session 62 on\nsessions 3-5\nsessionless 4"), [2, 3]);
    assert_eq!(link_targets("see [a](docs/a.md#x) and [b](../b.md \"title\")"), ["docs/a.md#x", "../b.md"]);
    assert_eq!(folded(Path::new("/r/docs/../README.md")), Path::new("/r/README.md"));
    assert_eq!(prose("a\n```\n[x](y)\n```\nb").into_iter().map(|(number, _)| number).collect::<Vec<_>>(), [1, 5]);
}
