//! What a user meets around a run: grouped help with the required arguments in the usage line, a config
//! template written from the schema alone, the footer that says a file is synthetic (and that eval reads the
//! run's bounds from), "no such column" with the closest names, outputs named for another format refused,
//! owner-only lines kept out of logs, the ε warning, and what the report says of its ε and its bound.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, StringArray};

use crate::common::{assert_refused, dpsynth, floats, footer, stderr, write_parquet};

const ROWS: usize = 4000;

/// x in [0, 1], an integer count in [0, 50] and a carrier among three, with a distinctive carrier value that
/// a template must never show.
fn table(dir: &Path) -> PathBuf {
    let path = dir.join("in.parquet");
    let carriers = ["AA", "B6", "ZQ-SECRET"];
    write_parquet(
        &path,
        vec![
            ("x", floats((0..ROWS).map(|i| (i % 97) as f64 / 97.0))),
            ("count", Arc::new(Int64Array::from_iter_values((0..ROWS).map(|i| (i % 51) as i64))) as ArrayRef),
            ("carrier", Arc::new(StringArray::from_iter_values((0..ROWS).map(|i| carriers[i % 3]))) as ArrayRef),
        ],
        1000,
    );
    path
}

const DOMAIN: &[&str] = &["--bounds", "x=0:1", "--bounds", "count=0:50", "--categories", "carrier=AA,B6,ZQ-SECRET"];

fn text(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// synth at ε = 1 unless `extra` gives its own.
fn synth(input: &Path, output: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["synth", text(input), "--output", text(output)];
    args.extend_from_slice(DOMAIN);
    args.extend_from_slice(extra);
    if !extra.contains(&"--epsilon") {
        args.extend(["--epsilon", "1"]);
    }
    dpsynth(&args)
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The outline of `synth --help`: its usage lines, then each heading with its flags, in order. A flag that
/// moves group, a heading renamed or the usage line losing a required argument shows as a difference;
/// `DPSYNTH_BLESS=1` re-records it (say why in the commit).
#[test]
fn synth_help_groups_its_flags_under_headings_and_shows_the_required_arguments() {
    let result = dpsynth(&["synth", "--help"]);
    assert!(result.status.success());
    let help = String::from_utf8(result.stdout).unwrap();
    let mut outline = String::new();
    for line in help.lines() {
        let indent = line.len() - line.trim_start().len();
        let flag =
            line.trim_start().trim_start_matches("-o, ").strip_prefix("--").filter(|_| (2..=6).contains(&indent));
        if line.starts_with("Usage:") || line.starts_with("       dpsynth") {
            outline += &format!("{}\n", line.trim());
        } else if !line.starts_with(' ') && line.ends_with(':') {
            outline += &format!("{line}\n");
        } else if let Some(flag) = flag {
            outline += &format!("  --{}\n", flag.split([' ', '\n']).next().unwrap());
        }
    }
    let recorded = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/synth_help_outline.txt");
    if std::env::var_os("DPSYNTH_BLESS").is_some() {
        std::fs::write(&recorded, &outline).unwrap();
    }
    assert_eq!(outline, std::fs::read_to_string(&recorded).unwrap_or_default(), "re-record with DPSYNTH_BLESS=1");
    assert!(outline.contains("dpsynth synth <INPUT> --epsilon <EPSILON> --output <OUTPUT>"));
    for heading in ["Input:", "Privacy:", "Output:", "Performance:"] {
        assert!(outline.contains(heading), "{heading} missing:\n{outline}");
    }
}

/// Every argument of every subcommand has a description in `--help`.
#[test]
fn every_argument_of_every_subcommand_is_described() {
    for command in ["synth", "eval", "inspect", "generate", "stream"] {
        let result = dpsynth(&[command, "--help"]);
        assert!(result.status.success(), "{command}");
        let help = String::from_utf8(result.stdout).unwrap();
        let lines: Vec<&str> = help.lines().collect();
        let indent = |line: &str| line.len() - line.trim_start().len();
        for (index, line) in lines.iter().enumerate() {
            let trimmed = line.trim_start();
            // An argument's line is indented 2 (or 6, a long flag without a short one); its description 10.
            let is_argument = (trimmed.starts_with('-') || trimmed.starts_with('<')) && (2..=6).contains(&indent(line));
            if !is_argument {
                continue;
            }
            // Long help puts the description on the next line; short help on the same one.
            let described_here = trimmed.split_once("  ").is_some_and(|(_, rest)| !rest.trim().is_empty());
            let described_below =
                lines.get(index + 1).is_some_and(|next| indent(next) >= 10 && !next.trim().is_empty());
            assert!(described_here || described_below, "{command} --help: '{trimmed}' has no description");
        }
    }
}

/// The template names every column with its type and a commented placeholder domain, holds nothing read
/// from the values, and stops synth with the list of columns still without a domain until filled in.
#[test]
fn the_config_template_lists_every_column_and_reads_no_value() {
    let dir = tempfile::tempdir().unwrap();
    let input = table(dir.path());
    let template = dir.path().join("run.toml");
    let result = dpsynth(&["inspect", text(&input), "--config-template", text(&template)]);
    assert!(result.status.success(), "{}", stderr(&result));
    let written = std::fs::read_to_string(&template).unwrap();
    assert!(written.contains(r#"columns = ["x", "count", "carrier"]"#), "{written}");
    assert!(written.contains("# x = [LO, HI]  # Float64") && written.contains("# count = [LO, HI]  # Int64"));
    assert!(written.contains("# carrier = [\"A\", \"B\", ...]  # Utf8"), "{written}");
    assert!(
        !written.contains("ZQ-SECRET") && !written.contains("AA"),
        "a value of the data in the template:\n{written}"
    );
    // Unfilled, it stops the run and names every column at once.
    let output = dir.path().join("out.parquet");
    let run = |config: &Path| {
        dpsynth(&["synth", text(&input), "--config", text(config), "--epsilon", "1", "--output", text(&output)])
    };
    let refused = run(&template);
    assert_eq!(refused.status.code(), Some(2));
    assert!(stderr(&refused).contains("3 columns have no public domain: x, count, carrier"), "{}", stderr(&refused));
    // Filled in, it runs.
    let filled = written
        .replace("# x = [LO, HI]", "x = [0, 1]")
        .replace("# count = [LO, HI]", "count = [0, 50]")
        .replace("# carrier = [\"A\", \"B\", ...]", "carrier = [\"AA\", \"B6\", \"ZQ-SECRET\"]");
    std::fs::write(&template, filled).unwrap();
    let ran = run(&template);
    assert!(ran.status.success(), "{}", stderr(&ran));
    // An existing template is not replaced without --force.
    assert_refused(&["inspect", text(&input), "--config-template", text(&template)], &["run.toml", "--force"]);
    assert!(std::fs::read_to_string(&template).unwrap().contains("x = [0, 1]"));
}

/// Every synthetic file says what it is in its footer, inspect shows it, and a seeded run leaves its time
/// out so that the same seed writes the same bytes.
#[test]
fn a_synthetic_file_says_what_made_it() {
    let dir = tempfile::tempdir().unwrap();
    let input = table(dir.path());
    let output = dir.path().join("out.parquet");
    let result = synth(&input, &output, &[]);
    assert!(result.status.success(), "{}", stderr(&result));
    let keys = footer(&output);
    assert_eq!(keys["dpsynth.synthetic"], "true");
    assert!(keys["dpsynth.tool"].starts_with("dpsynth "));
    assert_eq!(keys["dpsynth.mechanism"], "pmm");
    assert_eq!(keys["dpsynth.epsilon"], "1");
    assert_eq!(keys["dpsynth.delta"], "0");
    assert_eq!(keys["dpsynth.neighbours"], "add-remove");
    let time = &keys["dpsynth.released_at"];
    assert!(time.len() == 20 && time.ends_with('Z') && time.starts_with("20"), "{time}");
    let domain: serde_json::Value = serde_json::from_str(&keys["dpsynth.domain"]).unwrap();
    assert_eq!(domain["bounds"]["count"], serde_json::json!([0.0, 50.0]));
    assert_eq!(domain["categories"]["carrier"], serde_json::json!(["AA", "B6", "ZQ-SECRET"]));
    let shown = dpsynth(&["inspect", text(&output)]);
    let shown = String::from_utf8(shown.stdout).unwrap();
    assert!(shown.contains("synthetic table") && shown.contains("dpsynth.epsilon") && shown.contains("add-remove"));

    let seeded = |name: &str| {
        let path = dir.path().join(name);
        let result = synth(&input, &path, &["--seed", "3", "--mechanism", "psmm"]);
        assert!(result.status.success(), "{}", stderr(&result));
        path
    };
    let (first, second) = (seeded("a.parquet"), seeded("b.parquet"));
    let keys = footer(&first);
    assert!(!keys.contains_key("dpsynth.released_at") && keys["dpsynth.seeded"].starts_with("true"));
    assert_eq!(keys["dpsynth.mechanism"], "psmm");
    assert_eq!(std::fs::read(&first).unwrap(), std::fs::read(&second).unwrap());
}

/// eval given no bounds compares with the run's public bounds: from --run-report, else from the synthetic
/// file's footer, and the numbers are those of an eval given the same bounds by hand.
#[test]
fn eval_reads_the_bounds_of_the_run_when_given_none() {
    let dir = tempfile::tempdir().unwrap();
    let input = table(dir.path());
    let (output, report) = (dir.path().join("out.parquet"), dir.path().join("report.json"));
    let result = synth(&input, &output, &["--report", text(&report), "--seed", "1"]);
    assert!(result.status.success(), "{}", stderr(&result));
    let eval = |extra: &[&str], name: &str| {
        let written = dir.path().join(name);
        let mut args = vec!["eval", "--real", text(&input), "--synth", text(&output), "--json", text(&written)];
        args.extend_from_slice(extra);
        let result = dpsynth(&args);
        assert!(result.status.success(), "{extra:?}: {}", stderr(&result));
        (json(&written), stderr(&result))
    };
    let (by_hand, _) = eval(&["--bounds", "x=0:1", "--bounds", "count=0:50"], "by_hand.json");
    let (from_report, notes) = eval(&["--run-report", text(&report)], "from_report.json");
    assert!(notes.contains("report.json") && notes.contains("not compared") && notes.contains("carrier"), "{notes}");
    let (from_footer, notes) = eval(&[], "from_footer.json");
    assert!(notes.contains("out.parquet"), "{notes}");
    let columns = |json: &serde_json::Value| json["columns"].clone();
    assert_eq!(columns(&by_hand), columns(&from_report));
    assert_eq!(columns(&by_hand), columns(&from_footer));
    assert_eq!(by_hand["columns"].as_array().map(Vec::len), Some(2), "{by_hand}");
}

#[test]
fn an_unknown_column_is_answered_with_the_closest_names() {
    let dir = tempfile::tempdir().unwrap();
    let input = table(dir.path());
    let output = dir.path().join("out.parquet");
    let base = ["synth", text(&input), "--epsilon", "1", "--output", text(&output)];
    let with = |extra: &[&'static str]| [&base[..], DOMAIN, extra].concat();
    assert_refused(&with(&["--columns", "x,cuont"]), &["'cuont'", "no such column", "did you mean 'count'?"]);
    assert_refused(&with(&["--exclude", "Carrier"]), &["'Carrier'", "did you mean 'carrier'?"]);
    assert_refused(&[&base[..], &["--bounds", "xx=0:1"]].concat(), &["'xx'", "did you mean 'x'?"]);
    assert!(!output.exists());
}

#[test]
fn an_output_named_for_another_format_is_refused_with_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let input = table(dir.path());
    for name in ["out.csv", "out.json"] {
        let output = dir.path().join(name);
        let mut args = vec!["synth", text(&input), "--epsilon", "1", "--output", text(&output)];
        args.extend_from_slice(DOMAIN);
        assert_refused(&args, &[name, "dpsynth writes Parquet", ".parquet"]);
        assert!(!output.exists());
    }
    let generated = dir.path().join("g.csv");
    assert_refused(&["generate", text(&generated), "--rows", "10", "--dims", "2"], &["g.csv", "writes Parquet"]);
    assert!(!generated.exists());
    let (saved, sampled) = (dir.path().join("r.dpr"), dir.path().join("s.tsv"));
    let result = synth(&input, &dir.path().join("t.parquet"), &["--save-release", text(&saved)]);
    assert!(result.status.success(), "{}", stderr(&result));
    assert_refused(&["sample", text(&saved), "--output", text(&sampled)], &["s.tsv", "writes Parquet"]);
    assert!(!sampled.exists());
}

/// The owner-only line (true row count) is kept out of a non-interactive run's stderr unless asked for,
/// and no progress bar is drawn there.
#[test]
fn owner_lines_stay_out_of_batch_logs_unless_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let input = table(dir.path());
    let output = dir.path().join("out.parquet");
    let quiet_log = stderr(&synth(&input, &output, &[]));
    assert!(quiet_log.contains("wrote ") && !quiet_log.contains("NOT PRIVATE"), "{quiet_log}");
    assert!(!quiet_log.contains("eta") && !quiet_log.contains('\r'), "a progress bar in a log: {quiet_log}");
    let asked = stderr(&synth(&input, &output, &["--owner-summary"]));
    assert!(asked.contains(&format!("NOT PRIVATE (owner only): {ROWS} rows binned")), "{asked}");
}

#[test]
fn an_epsilon_above_ten_is_warned_and_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let input = table(dir.path());
    let output = dir.path().join("out.parquet");
    let warned = stderr(&synth(&input, &output, &["--epsilon", "20"]));
    assert!(warned.contains("warning: ε = 20 is above 10"), "{warned}");
    let plain = stderr(&synth(&input, &output, &[]));
    assert!(!plain.contains("warning"), "{plain}");
    for log in [warned, plain] {
        assert!(!log.contains("NaN") && !log.contains(" inf"), "{log}");
    }
}

/// The report's ε breakdown gives each release its share and relation, summing to the ε spent; the
/// default's bound says it does not hold for the mapped table, textbook PMM's that it does.
#[test]
fn the_report_states_each_releases_share_and_what_its_bound_covers() {
    let dir = tempfile::tempdir().unwrap();
    let input = table(dir.path());
    let output = dir.path().join("out.parquet");
    // ε·n = 4·10^4: auto calibrates the three columns to their released marginals.
    for (mechanism, neighbours, holds) in [("auto", "add-remove", false), ("pmm", "replace", true)] {
        let report = dir.path().join(format!("{mechanism}.json"));
        let result = synth(
            &input,
            &output,
            &["--mechanism", mechanism, "--neighbours", neighbours, "--report", text(&report), "--epsilon", "10"],
        );
        assert!(result.status.success(), "{}", stderr(&result));
        let report = json(&report);
        let parts = report["guarantee"]["epsilon_breakdown"].as_array().unwrap().clone();
        assert!(parts.len() > 3);
        let shares: f64 = parts.iter().map(|part| part["share"].as_f64().unwrap()).sum();
        let spent = report["guarantee"]["epsilon_spent"].as_f64().unwrap();
        assert!((shares * 10.0 - spent).abs() < 1e-9 && spent <= 10.0, "{shares} of ε = 10 against {spent} spent");
        for part in &parts {
            assert_eq!(part["relation"], neighbours);
            assert!((part["share"].as_f64().unwrap() * 10.0 - part["epsilon"].as_f64().unwrap()).abs() < 1e-12);
        }
        assert_eq!(report["accuracy"]["holds_for_table"], holds, "{mechanism}");
        let said = stderr(&result);
        assert_eq!(said.contains("no W1 bound is proven for this table"), !holds, "{said}");
    }
}
