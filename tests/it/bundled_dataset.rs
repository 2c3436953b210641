//! The README's main job runs on the bundled dataset with no other input, and its bounds file
//! covers every value (so the job clamps nothing).

use std::path::Path;

use crate::common::*;

#[test]
fn readme_main_job_runs_on_the_bundled_flights_table() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("flights_synth.parquet");
    let report = dir.path().join("flights_report.json");
    let diagnostics = dir.path().join("diagnostics.json");
    let result = dpsynth(&[
        "synth",
        root.join("datasets/flights.parquet").to_str().unwrap(),
        "--config",
        root.join("datasets/flights.toml").to_str().unwrap(),
        "--epsilon",
        "1",
        "--output",
        output.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--diagnostics",
        diagnostics.to_str().unwrap(),
    ]);
    assert_eq!(result.status.code(), Some(0), "{}", stderr(&result));
    let (fields, columns) = read_parquet(&output);
    let names: Vec<&str> = fields.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["dep_delay", "arr_delay", "air_time", "distance"]);
    assert!(fields.iter().all(|(_, data_type)| *data_type == arrow::datatypes::DataType::Int64));
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
    assert_eq!(columns[0].len() as u64, report["release"]["synthetic_rows"].as_u64().unwrap());
    let diagnostics: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(diagnostics).unwrap()).unwrap();
    assert_eq!(diagnostics["true_rows"], 327_346);
    assert_eq!(diagnostics["rows_clamped"], 0, "the public bounds should cover the bundled data");
    // The owner sees where the time went: each phase with its parts, in the order they ran.
    let phases: Vec<(String, f64, Vec<(String, f64)>)> = diagnostics["timings_seconds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|phase| {
            let parts = phase["parts"].as_array().map_or(Vec::new(), |parts| {
                parts
                    .iter()
                    .map(|part| (part["phase"].as_str().unwrap().to_string(), part["seconds"].as_f64().unwrap()))
                    .collect()
            });
            (phase["phase"].as_str().unwrap().to_string(), phase["seconds"].as_f64().unwrap(), parts)
        })
        .collect();
    let outline: Vec<(&str, Vec<&str>)> = phases
        .iter()
        .map(|(phase, _, parts)| (phase.as_str(), parts.iter().map(|(part, _)| part.as_str()).collect()))
        .collect();
    // The default at four columns is auto's quantile partition: n̂ and the marginals first, then the tree;
    // at ε·n̂ ≈ 3·10^5 the pair maps after it.
    assert!(report["parameters"]["auto"].as_str().unwrap().contains("d >= 4"), "{}", report["parameters"]);
    assert_eq!(report["parameters"]["marginal_calibration"]["partition"], "quantile");
    assert_eq!(report["parameters"]["pair_marginals"]["share"], 0.2);
    assert_eq!(
        outline,
        [
            ("count and marginals", vec![]),
            ("marginals", vec![]),
            ("bin", vec!["read and bin", "merge"]),
            ("noise and consistency", vec!["tree", "noise", "averaging", "consistency", "leaves"]),
            ("pairs", vec![]),
            ("sample and write", vec!["sample and encode", "write"]),
            ("close table", vec![]),
        ]
    );
    for (phase, seconds, parts) in &phases {
        assert!(*seconds >= 0.0 && parts.iter().all(|(_, part)| *part >= 0.0), "{phase}: {seconds}, {parts:?}");
        if phase != "sample and write" {
            // Sequential parts fit in their phase; sampling and writing overlap, so theirs may not.
            let sum: f64 = parts.iter().map(|(_, part)| part).sum();
            assert!(sum <= seconds + 1e-6, "{phase}: parts {sum} s > {seconds} s");
        }
    }
}
