//! `synth --mechanism psmm` end to end: the release under both relations, options, determinism, clear
//! refusals, and accuracy against the bound the report states (dissertation Theorem 3.6 / Corollary 3.7).

use std::path::{Path, PathBuf};

use dpsynth::eval::w1::{grid_histogram, w1_grid, Sample};
use dpsynth::geometry::bounds::ColumnBounds;
use dpsynth::mechanism::psmm::report::PsmmParameters;
use dpsynth::mechanism::MechanismParameters;
use dpsynth::options::{MechanismOptions, PsmmOptions};
use dpsynth::privacy::{Neighbours, DEFAULT_NOISY_N_SHARE};
use dpsynth::progress::Progress;
use dpsynth::synth::report::RunReport;
use dpsynth::{synthesize, OutputPaths, SynthOptions};

use crate::common::*;

const NAMES: [&str; 3] = ["x", "y", "z"];

/// Row-major points in [0,1]^d: three tight clusters over a uniform background.
fn points(rows: usize, dims: usize, seed: u64) -> Vec<f64> {
    let mut fixture = Fixture::new(seed);
    let centres = [[0.2, 0.7, 0.4], [0.75, 0.3, 0.8], [0.5, 0.5, 0.1]];
    let mut coords = Vec::with_capacity(rows * dims);
    for _ in 0..rows {
        let pick = (fixture.unit() * 4.0) as usize;
        for &centre in centres[pick % 3].iter().take(dims) {
            coords.push(if pick == 3 { fixture.unit() } else { (centre + 0.05 * fixture.normal()).clamp(0.0, 1.0) });
        }
    }
    coords
}

fn write_points(path: &Path, coords: &[f64], dims: usize) {
    write_parquet(
        path,
        (0..dims).map(|axis| (NAMES[axis], floats(coords.iter().skip(axis).step_by(dims).copied()))).collect(),
        4_000,
    );
}

fn options(dims: usize, epsilon: f64, neighbours: Neighbours, seed: u64) -> SynthOptions {
    let bounds = (0..dims).map(|axis| ColumnBounds::new(NAMES[axis], 0.0, 1.0).unwrap()).collect();
    let mut options = SynthOptions::new(epsilon, bounds);
    options.mechanism = MechanismOptions::Psmm(PsmmOptions { cells: None, noisy_n_share: DEFAULT_NOISY_N_SHARE });
    options.neighbours = neighbours;
    options.seed = Some(seed);
    options
}

/// Runs PSMM through the library; returns the report and the synthetic points (row-major).
fn run(input: &Path, output: &Path, options: &SynthOptions) -> (RunReport, Vec<f64>) {
    let outputs = OutputPaths { table: output.to_path_buf(), report: None, diagnostics: None };
    let outcome = synthesize(input, &outputs, options, &Progress::hidden()).unwrap();
    let columns = read_parquet(output).1;
    let rows = columns.first().map_or(0, Vec::len);
    let coords = (0..rows).flat_map(|row| columns.iter().map(move |column| column[row])).collect();
    (outcome.report, coords)
}

fn psmm(report: &RunReport) -> &PsmmParameters {
    match &report.parameters {
        MechanismParameters::Psmm(psmm) => psmm,
        other => panic!("a PSMM run reported {other:?}"),
    }
}

fn table(dir: &Path, rows: usize, dims: usize) -> (PathBuf, Vec<f64>) {
    let input = dir.join("real.parquet");
    let coords = points(rows, dims, 40 + dims as u64);
    write_points(&input, &coords, dims);
    (input, coords)
}

#[test]
fn release_under_both_relations_spends_at_most_epsilon() {
    let dir = tempfile::tempdir().unwrap();
    let (input, _) = table(dir.path(), 5_000, 2);
    let output = dir.path().join("synthetic.parquet");
    let epsilon = 0.8;

    // replace: n public, all of ε on the cells at scale 2/ε, m ≈ εn, output of exactly n rows.
    let (report, coords) = run(&input, &output, &options(2, epsilon, Neighbours::Replace, 1));
    let parameters = psmm(&report);
    assert_eq!(report.mechanism, "psmm");
    assert_eq!(parameters.cells_per_axis, 63, "round(sqrt(0.8 · 5000))");
    assert_eq!(parameters.cells, 63 * 63);
    assert_eq!(parameters.normaliser, 5_000);
    assert_eq!(parameters.epsilon_n_hat, None);
    assert!((parameters.noise_scale - 2.0 / epsilon).abs() < 1e-6 * 2.0 / epsilon);
    assert!(report.guarantee.epsilon_spent <= epsilon);
    assert!(report.guarantee.epsilon_spent >= epsilon * (1.0 - 1e-6));
    assert_eq!(report.release.synthetic_rows, 5_000);
    assert_eq!(coords.len(), 2 * 5_000);
    assert!(coords.iter().all(|x| (0.0..=1.0).contains(x)));
    let d_bl = parameters.d_bl_to_noisy_measure.unwrap();
    assert!(d_bl > 0.0 && d_bl < 1.0, "d_BL {d_bl}");

    // add-remove: n̂ released with ε/16 first, the rest on the cells at scale 1/(15ε/16).
    let (report, coords) = run(&input, &output, &options(2, epsilon, Neighbours::AddRemove, 1));
    let parameters = psmm(&report);
    let root = parameters.epsilon_n_hat.unwrap();
    assert!((root - epsilon / 16.0).abs() < 1e-6 * epsilon);
    assert!((parameters.epsilon_cells - 15.0 * epsilon / 16.0).abs() < 1e-6 * epsilon);
    assert!((parameters.noise_scale - 16.0 / (15.0 * epsilon)).abs() < 1e-6);
    assert!(report.guarantee.epsilon_spent <= epsilon);
    assert!(report.guarantee.epsilon_spent >= epsilon * (1.0 - 1e-6));
    assert_eq!(parameters.normaliser_is, "released noisy count n̂");
    assert_eq!(report.release.root_count, parameters.normaliser);
    assert_eq!(coords.len() as u64, 2 * parameters.normaliser, "n̂ rows by default");
    assert!(parameters.normaliser.abs_diff(5_000) < 400, "n̂ = {}", parameters.normaliser);
    let side = (epsilon * parameters.normaliser as f64).sqrt().round() as u32;
    assert_eq!(parameters.cells_per_axis, side, "k = round(sqrt(ε n̂))");
}

#[test]
fn cells_and_rows_options_are_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let (input, _) = table(dir.path(), 3_000, 3);
    let output = dir.path().join("synthetic.parquet");
    let mut options = options(3, 1.0, Neighbours::AddRemove, 2);
    options.mechanism =
        MechanismOptions::Psmm(PsmmOptions { cells: Some(1_000), noisy_n_share: DEFAULT_NOISY_N_SHARE });
    options.rows = Some(777);
    let (report, coords) = run(&input, &output, &options);
    let parameters = psmm(&report);
    assert_eq!((parameters.cells_per_axis, parameters.cells), (10, 1_000));
    // With --cells all of ε goes to the cells and M is the noisy total (post-processing).
    assert_eq!(parameters.epsilon_n_hat, None);
    assert!((parameters.epsilon_cells - 1.0).abs() < 1e-6);
    assert_eq!(parameters.normaliser_is, "max(1, sum of the noisy cell counts)");
    assert_eq!(report.release.synthetic_rows, 777);
    assert_eq!(coords.len(), 3 * 777);
}

#[test]
fn seeded_runs_do_not_depend_on_the_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let (input, _) = table(dir.path(), 20_000, 2);
    let mut outputs = Vec::new();
    for threads in [1, 2] {
        let output = dir.path().join(format!("synthetic_{threads}.parquet"));
        let result = dpsynth(&[
            "synth",
            input.to_str().unwrap(),
            "--output",
            output.to_str().unwrap(),
            "--epsilon",
            "1",
            "--bounds",
            "x=0:1",
            "--bounds",
            "y=0:1",
            "--mechanism",
            "psmm",
            "--seed",
            "9",
            "--threads",
            &threads.to_string(),
            "--quiet",
        ]);
        assert_eq!(result.status.code(), Some(0), "{}", stderr(&result));
        outputs.push(read_parquet(&output).1);
    }
    assert!(!outputs[0][0].is_empty());
    assert_eq!(outputs[0], outputs[1]);
}

#[test]
fn too_many_cells_fail_clearly_and_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (input, _) = table(dir.path(), 500, 2);
    let out_dir = tempfile::tempdir().unwrap();
    let output = out_dir.path().join("out.parquet");
    let report = out_dir.path().join("report.json");
    let base = [
        "synth",
        input.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "--epsilon",
        "1",
        "--bounds",
        "x=0:1",
        "--bounds",
        "y=0:1",
        "--mechanism",
        "psmm",
        "--quiet",
    ];
    let refused = |extra: &[&str], expected: &[&str]| {
        let result = dpsynth(&[&base[..], extra].concat());
        let message = stderr(&result);
        assert_eq!(result.status.code(), Some(2), "{extra:?}: {message}");
        for fragment in expected {
            assert!(message.contains(fragment), "'{fragment}' missing from: {message}");
        }
        assert!(files_in(out_dir.path()).is_empty());
    };
    refused(
        &["--cells", "1000000000", "--memory-limit-mib", "1024"],
        &["m = 1000014129", "31623 per axis", "--cells", "at most"],
    );
    refused(&["--depth", "8"], &["--depth", "pmm"]);
    refused(&["--device", "gpu"], &["--device gpu", "pmm"]);
}

/// Mean over seeds of an upper estimate of W1 (exact W1 of the two tables on a regular grid, plus the
/// grid's quantisation error) and of the bound each report states; and the grid W1 of the uniform
/// measure, what a release that ignored the data would reach.
fn mean_w1_and_bound(dims: usize, rows: usize, side: usize, neighbours: Neighbours) -> (f64, f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let (input, real) = table(dir.path(), rows, dims);
    let output = dir.path().join("synthetic.parquet");
    let real_hist = grid_histogram(&Sample::new(&real, dims).unwrap(), side).unwrap();
    let seeds = [21u64, 22, 23];
    let (mut w1_sum, mut bound_sum) = (0.0, 0.0);
    for seed in seeds {
        let (report, synthetic) = run(&input, &output, &options(dims, 1.0, neighbours, seed));
        let synthetic_hist = grid_histogram(&Sample::new(&synthetic, dims).unwrap(), side).unwrap();
        let w1 = w1_grid(&real_hist, &synthetic_hist, side, dims).unwrap();
        w1_sum += w1.value + w1.quantisation_error + w1.rounding_error;
        bound_sum += report.accuracy.expected_w1_bound;
    }
    let uniform = vec![1u64; real_hist.len()];
    let data_blind = w1_grid(&real_hist, &uniform, side, dims).unwrap().value;
    (w1_sum / seeds.len() as f64, bound_sum / seeds.len() as f64, data_blind)
}

#[test]
fn accuracy_is_within_the_reported_bound() {
    for (dims, rows, side, neighbours) in [
        (1, 20_000, 4_096, Neighbours::Replace),
        (2, 20_000, 64, Neighbours::Replace),
        (2, 20_000, 64, Neighbours::AddRemove),
        (3, 20_000, 16, Neighbours::Replace),
    ] {
        let (w1, bound, data_blind) = mean_w1_and_bound(dims, rows, side, neighbours);
        eprintln!("d={dims} {neighbours:?}: mean W1 ≤ {w1:.4}, bound {bound:.4}, uniform {data_blind:.4}");
        assert!(bound < 1.0, "d={dims}: the bound {bound} says nothing");
        assert!(w1 <= bound, "d={dims} {neighbours:?}: mean W1 estimate {w1} above the bound {bound}");
        // The bound is loose (constants of a union bound); the release must also beat ignoring the data.
        assert!(w1 < data_blind / 2.0, "d={dims} {neighbours:?}: W1 {w1}, the uniform measure {data_blind}");
    }
}

/// Largest |log ratio| of the frequencies of the noisy cell counts of two neighbouring histograms, over
/// outcomes frequent enough to compare (as `tests/privacy_loss.rs` does for PMM). The projection and
/// the sampling only post-process these counts.
fn max_log_ratio(neighbours: Neighbours, a: &[u64], b: &[u64], epsilon: f64) -> f64 {
    use dpsynth::mechanism::psmm::{noisy_cell_counts, PsmmBudget};
    use dpsynth::privacy::{NoiseKey, NoiseStream};
    use std::collections::HashMap;
    const RUNS: u64 = 60_000;
    const MIN_COUNT: u64 = 1_000;
    let budget = PsmmBudget::new(neighbours, epsilon, None).unwrap();
    let frequencies = |counts: &[u64], seed_base: u64| {
        let mut frequencies: HashMap<Vec<i64>, u64> = HashMap::new();
        for run in 0..RUNS {
            let key = NoiseKey::from_user_seed(seed_base + run);
            *frequencies
                .entry(noisy_cell_counts(counts, budget.cell_scale, &key, NoiseStream::PsmmCells))
                .or_insert(0) += 1;
        }
        frequencies
    };
    max_log_frequency_ratio(&frequencies(a, 0), &frequencies(b, 1 << 40), MIN_COUNT)
}

#[test]
fn neighbouring_histograms_stay_within_e_epsilon() {
    // Sampling slack on the log ratio: with ≥ 1000 hits per side the standard error is about 0.045.
    let (epsilon, slack) = (1.0, 0.2);
    // add-remove: one row more in cell 1; replace: one row moved from cell 0 to cell 1.
    for (neighbours, a, b) in [(Neighbours::AddRemove, [3u64, 5], [3u64, 6]), (Neighbours::Replace, [4, 5], [3, 6])] {
        let worst = max_log_ratio(neighbours, &a, &b, epsilon);
        assert!(worst <= epsilon + slack, "{neighbours:?}: log ratio {worst} exceeds ε");
        assert!(worst >= 0.5 * epsilon, "{neighbours:?}: log ratio {worst}, far more noise than ε needs");
    }
}
