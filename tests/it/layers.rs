//! The layers of src/ as the code has them: every top-level module imports only modules of lower layers,
//! in the order docs/design.md ("Layers") writes down, so no two modules import each other. Read from the
//! `crate::` paths of the source, comments and test modules aside.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The layers of docs/design.md, lowest first: the lines of the fenced block after the "## Layers" heading,
/// each a comma-separated list of modules.
fn documented_layers() -> Vec<Vec<String>> {
    let design = std::fs::read_to_string(root().join("docs/design.md")).unwrap();
    let section = design.split("\n## Layers\n").nth(1).expect("docs/design.md has a '## Layers' section");
    let block = section.split("```").nth(1).expect("the Layers section holds the order in a fenced block");
    block
        .lines()
        .map(|line| line.split('#').next().unwrap().trim())
        .filter(|line| !line.is_empty())
        .map(|line| line.split(',').map(|module| module.trim().to_string()).collect())
        .collect()
}

/// The top-level modules of src/: its files and folders, the crate roots aside.
fn top_level_modules() -> BTreeSet<String> {
    std::fs::read_dir(root().join("src"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir() || path.extension().is_some_and(|extension| extension == "rs"))
        .map(|path| path.file_stem().unwrap().to_string_lossy().into_owned())
        .filter(|name| name != "lib" && name != "main" && name != "testing")
        .collect()
}

fn rust_files(folder: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(folder).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path);
        }
    }
}

/// The source without comments and without the items under `#[cfg(test)]` (a test module's braces, or
/// the one item a test-only attribute stands on).
fn code_outside_tests(source: &str) -> String {
    let without_comments: String =
        source.lines().map(|line| format!("{}\n", line.split("//").next().unwrap())).collect();
    let mut code = String::new();
    let mut rest = without_comments.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        code.push_str(&rest[..at]);
        let item = &rest[at..];
        // The item ends at its `;` or at the brace that closes its first `{`, whichever comes first.
        let mut depth = 0usize;
        let mut end = item.len();
        for (offset, character) in item.char_indices() {
            match character {
                '{' => depth += 1,
                '}' if depth == 1 => {
                    end = offset + 1;
                    break;
                }
                '}' => depth = depth.saturating_sub(1),
                ';' if depth == 0 => {
                    end = offset + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &item[end..];
    }
    code.push_str(rest);
    code
}

/// The top-level modules a piece of code names through `crate::` paths, `use crate::{a, b}` groups included.
fn imported_modules(code: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let mut imported = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let after = &code[at + "crate::".len()..];
        let names: Vec<&str> = match after.strip_prefix('{') {
            Some(group) => group.split('}').next().unwrap().split(',').collect(),
            None => vec![after],
        };
        for name in names {
            let module: String = name.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if modules.contains(&module) {
                imported.insert(module);
            }
        }
    }
    imported
}

/// Each top-level module's imports of the others, with a file that makes each.
fn import_graph(modules: &BTreeSet<String>) -> BTreeMap<String, BTreeMap<String, PathBuf>> {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let mut graph: BTreeMap<String, BTreeMap<String, PathBuf>> = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(root().join("src")).unwrap();
        let first = relative.components().next().unwrap().as_os_str().to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        if !modules.contains(&module) {
            continue;
        }
        let code = code_outside_tests(&std::fs::read_to_string(&file).unwrap());
        for imported in imported_modules(&code, modules) {
            if imported != module {
                graph.entry(module.clone()).or_default().entry(imported).or_insert_with(|| relative.to_path_buf());
            }
        }
    }
    graph
}

#[test]
fn the_documented_layers_name_every_top_level_module_once() {
    let layers = documented_layers();
    let listed: Vec<&String> = layers.iter().flatten().collect();
    let unique: BTreeSet<String> = listed.iter().map(|name| name.to_string()).collect();
    assert_eq!(listed.len(), unique.len(), "a module is listed twice in docs/design.md's layers: {listed:?}");
    assert_eq!(unique, top_level_modules(), "docs/design.md's layers against the modules of src/");
}

#[test]
fn every_top_level_module_imports_only_lower_layers() {
    let layer_of: BTreeMap<String, usize> = documented_layers()
        .into_iter()
        .enumerate()
        .flat_map(|(layer, modules)| modules.into_iter().map(move |module| (module, layer)))
        .collect();
    let modules = top_level_modules();
    let mut upward = Vec::new();
    for (module, imports) in import_graph(&modules) {
        for (imported, file) in imports {
            if layer_of[&imported] >= layer_of[&module] {
                upward.push(format!("{module} imports {imported} (src/{})", file.display()));
            }
        }
    }
    assert!(upward.is_empty(), "imports against the layers of docs/design.md:\n{}", upward.join("\n"));
}

/// The reader above sees what it must: imports outside tests, grouped or not, and nothing in comments or
/// test modules.
#[test]
fn the_import_reader_skips_comments_and_tests_only() {
    let modules: BTreeSet<String> = ["binner", "cluster", "io", "noise", "sampler"].map(String::from).into();
    let source = "use crate::binner::pass::DataPass;\n\
                  use crate::{io::paths, noise};\n\
                  // crate::cluster is named in a comment only\n\
                  fn f() { crate::sampler::draw(); }\n\
                  #[cfg(test)]\nmod tests {\n    use crate::cluster::agree;\n    fn g() { if true { } }\n}\n\
                  #[cfg(test)]\nuse crate::cluster::local;\n";
    let imported = imported_modules(&code_outside_tests(source), &modules);
    assert_eq!(imported, ["binner", "io", "noise", "sampler"].map(String::from).into());
}
