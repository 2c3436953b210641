//! Release once, sample many times: `synth --save-release` writes the release, and `dpsynth sample` draws
//! from it without the data. With synth's seed the draw is synth's own table, row for row, for every kind
//! of released measure; a damaged, truncated, foreign or newer file is refused by name with nothing written.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, StringArray};

use crate::common::{assert_refused, dpsynth, files_in, floats, stderr, write_parquet};
use crate::mixed::{every_type_table, read_table, write_batch, EVERY_TYPE_CONFIG};

fn path(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn run(args: &[&str]) {
    let result = dpsynth(args);
    assert_eq!(result.status.code(), Some(0), "{args:?}: {}", stderr(&result));
}

fn report(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// A numeric table of 20 000 rows, x and z correlated, y integer; its bounds as flags.
fn numeric_table(dir: &Path) -> (PathBuf, Vec<&'static str>) {
    let input = dir.join("numeric.parquet");
    let rows = 20_000;
    let unit = |i: usize, salt: usize| ((i * 7919 + salt * 104_729) % 10_007) as f64 / 10_007.0;
    let y: ArrayRef =
        Arc::new(arrow::array::Int32Array::from_iter_values((0..rows).map(|i| (unit(i, 2) * 100.0) as i32 - 50)));
    write_parquet(
        &input,
        vec![
            ("x", floats((0..rows).map(|i| unit(i, 1).powi(2)))),
            ("y", y),
            ("z", floats((0..rows).map(|i| (unit(i, 1) * 8.0 + unit(i, 3) * 2.0).min(10.0)))),
        ],
        5_000,
    );
    (input, vec!["--bounds", "x=0:1", "--bounds", "y=-50:50", "--bounds", "z=0:10"])
}

/// `synth SYNTH_ARGS --seed 11 --save-release` then `sample --seed 11 SAMPLE_ARGS`: both tables must be the
/// same, schema and rows in order. Returns the saved release and synth's report.
fn sample_reproduces_synth(
    dir: &Path,
    input: &Path,
    synth_args: &[&str],
    sample_args: &[&str],
) -> (PathBuf, serde_json::Value) {
    let (synth_table, release, synth_report) = (dir.join("synth.parquet"), dir.join("run.dpr"), dir.join("synth.json"));
    let sampled = dir.join("sampled.parquet");
    let mut args = vec!["synth", path(input), "--seed", "11", "--quiet", "--output", path(&synth_table)];
    args.extend(["--report", path(&synth_report), "--save-release", path(&release)]);
    args.extend(synth_args);
    run(&args);
    let mut args = vec!["sample", path(&release), "--seed", "11", "--quiet", "--output", path(&sampled)];
    args.extend(sample_args);
    run(&args);
    let ((synth_schema, synth_rows), (sampled_schema, sampled_rows)) = (read_table(&synth_table), read_table(&sampled));
    assert_eq!(sampled_schema, synth_schema, "{synth_args:?}: names, order, types and nullability");
    assert!(synth_rows.num_rows() > 0);
    assert!(sampled_rows == synth_rows, "{synth_args:?}: the sampled table is synth's, row for row");
    let footer = crate::common::footer(&sampled);
    assert_eq!(footer, crate::common::footer(&synth_table), "{synth_args:?}: the footer says what made the release");
    assert_eq!(footer["dpsynth.synthetic"], "true");
    (release, report(&synth_report))
}

#[test]
fn the_default_mechanism_on_flights_saves_calibrated_pair_mapped_measures_that_sample_as_synth_drew() {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let input = root.join("datasets/flights.parquet");
    let config = root.join("datasets/flights.toml");
    let synth_args = ["--config", path(&config), "--epsilon", "1"];
    let (release, synth_report) = sample_reproduces_synth(dir.path(), &input, &synth_args, &[]);
    let parameters = &synth_report["parameters"];
    assert!(
        !parameters["marginal_calibration"].is_null() && !parameters["pair_marginals"].is_null(),
        "auto released calibrated and pair-mapped measures here: {parameters}"
    );

    // The sample's report is synth's, with its rows and a note that nothing was spent.
    let (sampled, sampled_report) = (dir.path().join("again.parquet"), dir.path().join("again.json"));
    run(&["sample", path(&release), "--seed", "5", "--quiet", "-o", path(&sampled), "--report", path(&sampled_report)]);
    let mut sample_report = report(&sampled_report);
    let sample = sample_report.as_object_mut().unwrap().remove("sample").unwrap();
    assert_eq!(sample["epsilon_spent_by_this_draw"], 0.0);
    assert_eq!(sample["saved_release"], path(&release));
    assert!(sample["note"].as_str().unwrap().contains("no budget was spent"));
    assert_eq!(sample_report, synth_report, "every key and number of synth's report, in its order");
    assert_eq!(
        sample_report.as_object().unwrap().keys().collect::<Vec<_>>(),
        synth_report.as_object().unwrap().keys().collect::<Vec<_>>()
    );

    // Another seed, or none, gives another table of the released size.
    let unseeded = dir.path().join("unseeded.parquet");
    run(&["sample", path(&release), "--quiet", "-o", path(&unseeded)]);
    let (_, first) = read_table(&sampled);
    let (_, second) = read_table(&unseeded);
    assert_eq!(first.num_rows() as u64, synth_report["release"]["root_count"].as_u64().unwrap());
    assert_eq!(second.num_rows(), first.num_rows());
    assert!(first != second, "fresh placement coins without --seed");
}

#[test]
fn rows_and_row_order_draw_as_synth_does() {
    let dir = tempfile::tempdir().unwrap();
    let (input, bounds) = numeric_table(dir.path());
    // The row order is saved with the release...
    let mut synth_args = bounds.clone();
    synth_args.extend(["--epsilon", "2", "--rows", "7000", "--row-order", "cells"]);
    let (release, _) = sample_reproduces_synth(dir.path(), &input, &synth_args, &["--rows", "7000"]);
    // ...and --row-order draws in another, as synth's would have.
    let (sampled, direct) = (dir.path().join("random.parquet"), dir.path().join("direct.parquet"));
    run(&[
        "sample",
        path(&release),
        "--seed",
        "11",
        "--quiet",
        "-o",
        path(&sampled),
        "--rows",
        "3000",
        "--row-order",
        "random",
    ]);
    let mut args = vec!["synth", path(&input), "--seed", "11", "--quiet", "-o", path(&direct)];
    args.extend(&bounds);
    args.extend(["--epsilon", "2", "--rows", "3000"]);
    run(&args);
    let (sampled, direct) = (read_table(&sampled).1, read_table(&direct).1);
    assert_eq!(sampled.num_rows(), 3000);
    assert!(sampled == direct, "--row-order random on the saved release is synth's random order");
}

/// Flights with its lists and nulls: the pair maps' parents include nullable numbers (a null cell beside
/// 32 of the bounds) and coded columns (a cell per code with rows), and both come back from the file.
#[test]
fn pair_maps_with_null_and_coded_parents_sample_as_synth_drew() {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (input, config) = (root.join("datasets/flights_mixed.parquet"), root.join("datasets/flights_mixed.toml"));
    let (_, report) = sample_reproduces_synth(dir.path(), &input, &["--config", path(&config), "--epsilon", "1"], &[]);
    let pairs = &report["parameters"]["pair_marginals"];
    let cells: Vec<u64> =
        pairs["cells_of_columns"].as_array().unwrap().iter().map(|cells| cells.as_u64().unwrap()).collect();
    // dep_delay, arr_delay and air_time are nullable numbers, distance is not; dest is coded.
    assert_eq!(&cells[..4], &[33, 33, 33, 32], "{pairs}");
    assert!(cells[6] > 33, "{pairs}");
    let mapped_parents: Vec<u64> = (pairs["pairs"].as_array().unwrap().iter())
        .filter(|pair| pair["mapped"] == true)
        .map(|pair| pair["parent"].as_u64().unwrap())
        .collect();
    assert!(mapped_parents.iter().any(|&parent| parent < 3), "a nullable parent mapped: {pairs}");
    assert!(mapped_parents.iter().any(|&parent| (4..=6).contains(&parent)), "a coded parent mapped: {pairs}");
}

#[test]
fn a_mixed_table_comes_back_with_its_schema_and_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (input, config) = (dir.path().join("mixed.parquet"), dir.path().join("mixed.toml"));
    write_batch(&input, &every_type_table());
    std::fs::write(&config, EVERY_TYPE_CONFIG).unwrap();
    let (_, report) = sample_reproduces_synth(dir.path(), &input, &["--config", path(&config), "--epsilon", "4"], &[]);
    assert_eq!(report["input"]["columns"].as_array().unwrap().len(), 9);
}

#[test]
fn every_kind_of_measure_samples_as_synth_drew() {
    let dir = tempfile::tempdir().unwrap();
    let (input, bounds) = numeric_table(dir.path());
    for mechanism in [
        &["--mechanism", "pmm"][..],
        &["--mechanism", "pmm", "--refine-share", "0.5"],
        &["--mechanism", "psmm"],
        &["--mechanism", "lowdim", "--root-share", "0.1"],
    ] {
        let mut args = bounds.clone();
        args.extend(mechanism);
        args.extend(["--epsilon", "1"]);
        let (_, report) = sample_reproduces_synth(dir.path(), &input, &args, &[]);
        assert_eq!(report["mechanism"], mechanism[1]);
    }

    // covloss's weighted points on a Boolean / one-hot encoding.
    let encoded = dir.path().join("encoded.parquet");
    let rows = 20_000;
    let carrier: ArrayRef = Arc::new(StringArray::from_iter_values((0..rows).map(|i| ["AA", "B6", "UA"][i * 7 % 3])));
    let delayed: ArrayRef = Arc::new(BooleanArray::from_iter((0..rows).map(|i| Some(i % 5 == 0))));
    write_parquet(
        &encoded,
        vec![("delayed", delayed), ("carrier", carrier), ("x", floats((0..rows).map(|i| (i % 97) as f64 / 97.0)))],
        5_000,
    );
    let covloss = [
        "--mechanism",
        "covloss",
        "--columns",
        "delayed,carrier,x",
        "--categories",
        "carrier=AA,B6,UA",
        "--bins",
        "x=4",
        "--bounds",
        "x=0:1",
        "--epsilon",
        "1",
        "--neighbours",
        "replace",
        "--damping",
        "cells",
    ];
    let (_, report) = sample_reproduces_synth(dir.path(), &encoded, &covloss, &[]);
    assert_eq!(report["mechanism"], "covloss");
    sample_reproduces_synth(dir.path(), &encoded, &[&covloss[..], &["--rows", "1234"]].concat(), &["--rows", "1234"]);
}

#[test]
fn damaged_truncated_foreign_and_newer_files_are_refused_by_name_with_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let (input, bounds) = numeric_table(dir.path());
    let (release, table) = (dir.path().join("good.dpr"), dir.path().join("t.parquet"));
    let mut args = vec!["synth", path(&input), "--quiet", "--epsilon", "1", "-o", path(&table)];
    args.extend(["--save-release", path(&release)]);
    args.extend(&bounds);
    run(&args);
    let good = std::fs::read(&release).unwrap();
    assert!(good.starts_with(b"DPSYNTH-RELEASE"));

    let mut flipped = good.clone();
    let middle = 35 + (good.len() - 35) / 2;
    flipped[middle] ^= 0x10;
    let mut newer = good.clone();
    newer[15..19].copy_from_slice(&2u32.to_le_bytes());
    let random: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let cases: [(&str, Vec<u8>, &str); 6] = [
        ("flipped.dpr", flipped, "checksum does not match"),
        ("truncated.dpr", good[..good.len() * 2 / 3].to_vec(), "truncated"),
        ("header.dpr", good[..20].to_vec(), "truncated"),
        ("table.dpr", std::fs::read(&input).unwrap(), "not a dpsynth saved release"),
        ("random.dpr", random, "not a dpsynth saved release"),
        ("newer.dpr", newer, "format version 2"),
    ];
    let outputs = dir.path().join("outputs");
    std::fs::create_dir(&outputs).unwrap();
    for (name, bytes, reason) in cases {
        let file = dir.path().join(name);
        std::fs::write(&file, bytes).unwrap();
        let (table, report) = (outputs.join("out.parquet"), outputs.join("out.json"));
        assert_refused(
            &["sample", path(&file), "-o", path(&table), "--report", path(&report), "--seed", "1"],
            &[name, reason],
        );
        assert!(files_in(&outputs).is_empty(), "{name}: nothing written, not even a temporary file");
    }
    // The good file still samples.
    run(&["sample", path(&release), "--quiet", "-o", path(&outputs.join("out.parquet"))]);
}

#[test]
fn the_saved_release_is_an_output_like_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let (input, bounds) = numeric_table(dir.path());
    let (release, table) = (dir.path().join("r.dpr"), dir.path().join("t.parquet"));
    // A refused run writes no release.
    let mut args = vec!["synth", path(&input), "--quiet", "--epsilon", "-1", "-o", path(&table)];
    args.extend(["--save-release", path(&release)]);
    args.extend(&bounds);
    assert_eq!(dpsynth(&args).status.code(), Some(2));
    assert!(!release.exists());
    // The release may not overwrite the input or another output.
    let mut args = vec!["synth", path(&input), "--quiet", "--epsilon", "1", "-o", path(&table)];
    args.extend(["--save-release", path(&table)]);
    args.extend(&bounds);
    assert_refused(&args, &["--save-release", "t.parquet"]);
    let mut args = vec!["synth", path(&input), "--quiet", "--epsilon", "1", "-o", path(&table)];
    args.extend(["--save-release", path(&input)]);
    args.extend(&bounds);
    assert_refused(&args, &["--save-release", "would overwrite"]);
}
