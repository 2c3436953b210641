//! `synth --mechanism pe` end to end: refusals (replace only, δ required and only for pe), the report's
//! accounting, each variant on real rows, accuracy on the unit disc of the paper's simulations, and
//! determinism whatever the thread count and device.

use std::path::{Path, PathBuf};

use dpsynth::binner::device::DeviceChoice;
use dpsynth::eval::w1::{grid_histogram, w1_grid, Sample};
use dpsynth::geometry::bounds::ColumnBounds;
use dpsynth::mechanism::pe::{PeDomain, PeInit, PeVariant};
use dpsynth::mechanism::MechanismParameters;
use dpsynth::options::{MechanismOptions, PeOptions};
use dpsynth::privacy::{zcdp, Neighbours};
use dpsynth::progress::Progress;
use dpsynth::synth::report::RunReport;
use dpsynth::{synthesize, OutputPaths, SynthOptions};

use crate::common::*;

/// `rows` points uniform in the disc inscribed in [0,1]² (the paper's unit disc, normalised).
fn disc(rows: usize, seed: u64) -> Vec<f64> {
    let mut fixture = Fixture::new(seed);
    let mut coords = Vec::with_capacity(2 * rows);
    while coords.len() < 2 * rows {
        let (x, y) = (fixture.unit(), fixture.unit());
        if (x - 0.5).hypot(y - 0.5) <= 0.5 {
            coords.extend([x, y]);
        }
    }
    coords
}

fn write_xy(path: &Path, coords: &[f64], names: [&str; 2]) {
    write_parquet(
        path,
        vec![
            (names[0], floats(coords.iter().step_by(2).copied())),
            (names[1], floats(coords.iter().skip(1).step_by(2).copied())),
        ],
        3_000,
    );
}

fn options(epsilon: f64, delta: f64, pe: PeOptions, seed: u64) -> SynthOptions {
    let bounds = ["x", "y"].iter().map(|&name| ColumnBounds::new(name, 0.0, 1.0).unwrap()).collect();
    let mut options = SynthOptions::new(epsilon, bounds);
    options.neighbours = Neighbours::Replace;
    options.mechanism = MechanismOptions::Pe(PeOptions { delta, ..pe });
    options.seed = Some(seed);
    options
}

fn run(input: &Path, output: &Path, options: &SynthOptions) -> (RunReport, Vec<f64>) {
    let outputs = OutputPaths { table: output.to_path_buf(), report: None, diagnostics: None };
    let outcome = synthesize(input, &outputs, options, &Progress::hidden()).unwrap();
    let columns = read_parquet(output).1;
    let coords = (0..columns[0].len()).flat_map(|row| columns.iter().map(move |column| column[row])).collect();
    (outcome.report, coords)
}

fn table(dir: &Path, rows: usize) -> (PathBuf, Vec<f64>) {
    let input = dir.join("disc.parquet");
    let coords = disc(rows, 77);
    write_xy(&input, &coords, ["x", "y"]);
    (input, coords)
}

/// W1 in ℓ∞ on a 64² grid (within 1/64 of the exact value).
fn w1(a: &[f64], b: &[f64]) -> f64 {
    let side = 64;
    let a = grid_histogram(&Sample::new(a, 2).unwrap(), side).unwrap();
    let b = grid_histogram(&Sample::new(b, 2).unwrap(), side).unwrap();
    w1_grid(&a, &b, side, 2).unwrap().value
}

#[test]
fn from_the_centre_pe_moves_towards_the_disc() {
    let dir = tempfile::tempdir().unwrap();
    let (input, data) = table(dir.path(), 10_000);
    let output = dir.path().join("pe.parquet");
    let pe = PeOptions { init: PeInit::Centre, domain: PeDomain::Ball, ..PeOptions::with_delta(1e-4) };
    let (report, synthetic) = run(&input, &output, &options(1.0, 1e-4, pe, 3));
    // W1 of the start (every point at the centre) is the mean ℓ∞ distance to it, exactly.
    let initial = data.chunks_exact(2).map(|p| (p[0] - 0.5).abs().max((p[1] - 0.5).abs())).sum::<f64>() / 10_000.0;
    let last = w1(&data, &synthetic);
    assert!(last + 1.0 / 64.0 < 0.5 * initial, "final W1 {last} vs initial {initial}");
    assert_eq!(report.release.synthetic_rows, 10_000);
    let MechanismParameters::Pe(parameters) = &report.parameters else {
        panic!("a pe report expected");
    };
    assert_eq!(parameters.steps, 18, "round(2 ln(10^4))");
    assert_eq!(parameters.steps_released.len(), 18);
    assert_eq!(parameters.candidates_per_step, parameters.samples * parameters.variations_per_point);
    // Candidates sit on the 2^-21 lattice: at most 2^-22 per coordinate outside the disc.
    assert!(synthetic.chunks_exact(2).all(|p| (p[0] - 0.5).hypot(p[1] - 0.5) <= 0.5 + 1e-6));
}

#[test]
fn the_report_states_the_accounting_and_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    let (input, _) = table(dir.path(), 3_000);
    let output = dir.path().join("pe.parquet");
    let (epsilon, delta) = (0.7, 1e-5);
    let (report, _) = run(&input, &output, &options(epsilon, delta, PeOptions::with_delta(delta), 1));
    assert_eq!(report.mechanism, "pe");
    assert_eq!(report.guarantee.delta, delta);
    assert!(report.guarantee.noise.contains("discrete Gaussian"));
    assert!(report.guarantee.epsilon_spent <= epsilon);
    let MechanismParameters::Pe(parameters) = &report.parameters else {
        panic!("a pe report expected");
    };
    let privacy = &parameters.privacy;
    assert!(privacy.accountant.contains("zCDP"));
    // Recomputed from the released variance alone: T steps of 1/σ²-zCDP.
    let variance = privacy.count_noise_variance_num.unwrap() as f64 / privacy.count_noise_variance_den.unwrap() as f64;
    let rho = f64::from(parameters.steps) / variance;
    assert!((rho - privacy.rho_total.unwrap()).abs() <= 1e-12 * rho);
    assert!(zcdp::delta_for(rho, epsilon) <= delta);
    assert!(zcdp::epsilon_for(rho, delta) <= epsilon);
    assert!(privacy.epsilon_spent <= epsilon && privacy.delta_spent <= delta);
    // σ on the probability scale is the count noise's σ over the public n.
    assert!((parameters.sigma - variance.sqrt() / 3_000.0).abs() < 1e-12);
}

#[test]
fn every_variant_runs_and_spends_at_most_the_request() {
    let dir = tempfile::tempdir().unwrap();
    let (input, data) = table(dir.path(), 2_000);
    let output = dir.path().join("pe.parquet");
    for variant in [PeVariant::Projection, PeVariant::Threshold, PeVariant::LaplaceThreshold] {
        let pe = PeOptions { variant, ..PeOptions::with_delta(1e-4) };
        let (report, synthetic) = run(&input, &output, &options(1.0, 1e-4, pe, 5));
        assert!(report.guarantee.epsilon_spent <= 1.0, "{variant:?}");
        assert_eq!(synthetic.len(), data.len());
        assert!(synthetic.iter().all(|x| (0.0..=1.0).contains(x)));
        let MechanismParameters::Pe(parameters) = &report.parameters else {
            panic!("a pe report expected");
        };
        match variant {
            PeVariant::Projection => {
                assert!(parameters.steps_released.iter().all(|step| step.d_bl_to_noisy_histogram.is_some()))
            }
            PeVariant::LaplaceThreshold => {
                let privacy = &parameters.privacy;
                let steps = f64::from(parameters.steps);
                assert!(privacy.epsilon_per_step.unwrap() * steps <= 1.0);
                assert!(privacy.delta_per_step.unwrap() * steps <= 1e-4);
                assert!(report.guarantee.noise.contains("discrete Laplace"));
            }
            PeVariant::Threshold => {}
        }
    }
}

#[test]
fn seeded_runs_are_identical_for_any_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let (input, _) = table(dir.path(), 6_000);
    let bytes = |threads: usize, name: &str| {
        let output = dir.path().join(name);
        let mut options = options(1.0, 1e-5, PeOptions::with_delta(1e-5), 11);
        options.threads = Some(threads);
        run(&input, &output, &options);
        std::fs::read(&output).unwrap()
    };
    let one = bytes(1, "one.parquet");
    assert_eq!(one, bytes(2, "two.parquet"));
    assert_eq!(one, bytes(3, "three.parquet"));
}

#[test]
fn gpu_and_cpu_runs_are_identical_on_both_domains() {
    let dir = tempfile::tempdir().unwrap();
    let (input, _) = table(dir.path(), 3_000);
    for domain in [PeDomain::Box, PeDomain::Ball] {
        let run_on = |device: DeviceChoice| {
            let output = dir.path().join(format!("{device:?}.parquet"));
            let pe = PeOptions { domain, device, ..PeOptions::with_delta(1e-5) };
            let outputs = OutputPaths { table: output.clone(), report: None, diagnostics: None };
            synthesize(&input, &outputs, &options(1.0, 1e-5, pe, 13), &Progress::hidden())
                .map(|outcome| (outcome.report, std::fs::read(&output).unwrap()))
        };
        let (cpu_report, cpu) = run_on(DeviceChoice::Cpu).unwrap();
        let (auto_report, auto) = run_on(DeviceChoice::Auto).unwrap();
        assert!(auto == cpu, "{domain:?}: auto's table differs");
        assert!(
            auto_report.device.starts_with("cpu (nearest-neighbour k-d tree")
                || auto_report.device.starts_with("gpu: "),
            "{}",
            auto_report.device
        );
        let (gpu_report, gpu) = match run_on(DeviceChoice::Gpu) {
            Err(error) if error.to_string().contains("no GPU adapter") => {
                no_gpu_adapter("pe --device gpu was NOT compared with --device cpu");
                return;
            }
            other => other.unwrap(),
        };
        assert_eq!(cpu, gpu, "{domain:?}: the tables differ");
        assert!(cpu_report.device.starts_with("cpu (nearest-neighbour k-d tree"));
        assert!(gpu_report.device.starts_with("gpu: "), "{}", gpu_report.device);
    }
}

#[test]
fn rows_read_again_at_every_step_give_the_same_table() {
    let dir = tempfile::tempdir().unwrap();
    let (input, _) = table(dir.path(), 2_000);
    let run_with = |memory_limit: Option<u64>, name: &str| {
        let output = dir.path().join(name);
        let pe = PeOptions { steps: Some(4), ..PeOptions::with_delta(1e-5) };
        let mut options = options(1.0, 1e-5, pe, 19);
        options.memory_limit = memory_limit;
        let (report, _) = run(&input, &output, &options);
        (report, std::fs::read(&output).unwrap())
    };
    let (held_report, held) = run_with(None, "held.parquet");
    // 2000 rows × 2 columns × 8 bytes = 32 000 bytes: above a limit of 20 000 the steps read them again.
    let (streamed_report, streamed) = run_with(Some(20_000), "streamed.parquet");
    assert!(held == streamed, "the tables differ");
    assert!(streamed_report.device.contains("read again at every step"), "{}", streamed_report.device);
    assert!(!held_report.device.contains("read again"), "{}", held_report.device);
}

#[test]
fn a_public_init_table_is_read_in_the_runs_column_order() {
    let dir = tempfile::tempdir().unwrap();
    let (input, _) = table(dir.path(), 2_000);
    // The public table has its columns the other way round, and only points near (0.9, 0.1).
    let init = dir.path().join("public.parquet");
    let corner: Vec<f64> = (0..50).flat_map(|i| [0.1 + i as f64 * 1e-4, 0.9]).collect();
    write_xy(&init, &corner, ["y", "x"]);
    let pe = PeOptions { init: PeInit::File(init), steps: Some(1), ..PeOptions::with_delta(1e-4) };
    let (_, synthetic) = run(&input, &dir.path().join("pe.parquet"), &options(1.0, 1e-4, pe, 2));
    // One step moves the points at most a few variation scales away from (x, y) = (0.9, 0.1).
    let near = synthetic.chunks_exact(2).filter(|p| (p[0] - 0.9).abs() < 0.45 && (p[1] - 0.1).abs() < 0.45).count();
    assert!(near * 10 >= 9 * synthetic.len() / 2, "{near}");
}

#[test]
fn the_cli_refuses_add_remove_and_misplaced_delta() {
    let dir = tempfile::tempdir().unwrap();
    let (input, _) = table(dir.path(), 100);
    let output = dir.path().join("out.parquet");
    let base = [
        "synth",
        input.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
        "--bounds",
        "x=0:1",
        "--bounds",
        "y=0:1",
        "--epsilon",
        "1",
    ];
    for (extra, expected) in [
        (&["--mechanism", "pe", "--delta", "1e-5"][..], "replace only"),
        (&["--mechanism", "pe", "--neighbours", "replace"][..], "--delta"),
        (&["--delta", "1e-5"][..], "--delta applies to --mechanism pe"),
        (&["--pe-steps", "4"][..], "--pe-steps"),
        (&["--mechanism", "pe", "--neighbours", "replace", "--delta", "2"][..], "--delta strictly between 0 and 1"),
    ] {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        let result = dpsynth(&args);
        assert_eq!(result.status.code(), Some(2), "{extra:?}: {}", stderr(&result));
        assert!(stderr(&result).contains(expected), "{extra:?}: {}", stderr(&result));
        assert!(!output.exists());
    }
    let mut args = base.to_vec();
    args.extend_from_slice(&["--mechanism", "pe", "--neighbours", "replace", "--delta", "1e-5"]);
    let result = dpsynth(&args);
    assert_eq!(result.status.code(), Some(0), "{}", stderr(&result));
}
