//! One conformance suite for every binner: the CPU binner with each deposit method and, when an
//! adapter exists, the GPU binner must give bit-identical leaf histograms on the same Parquet input,
//! including points on cell boundaries, the value hi, clamped values and every column type.
//!
//! Without a wgpu adapter the GPU cases print a loud SKIPPED line; with DPSYNTH_REQUIRE_GPU set (CI
//! sets it once lavapipe is installed) a missing adapter fails the suite instead.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use arrow::array::*;
use dpsynth::binner::cpu::{CpuBinner, DepositMethod};
use dpsynth::binner::{scan_leaf_counts, AxisPlan, Binner, NullPolicy};
use dpsynth::geometry::bounds::ColumnBounds;
use dpsynth::geometry::partition::CellGeometry;
use dpsynth::io::source::Source;
use dpsynth::progress::{Progress, Timings};

use crate::common::*;

/// Columns of every supported type whose values hit cell boundaries, both bounds and beyond them.
fn conformance_table(path: &Path, rows: usize) -> Vec<ColumnBounds> {
    let mut fixture = Fixture::new(17);
    // A third of the values sit exactly on dyadic boundaries of [0, 1]; some fall outside it.
    let mut unit = || {
        let pick = fixture.unit();
        if pick < 0.33 {
            (fixture.unit() * 64.0).floor() / 64.0
        } else if pick < 0.4 {
            [0.0, 1.0, -0.25, 1.5][(fixture.unit() * 4.0) as usize]
        } else {
            fixture.unit()
        }
    };
    let f64s: Vec<f64> = (0..rows).map(|_| unit()).collect();
    let f32s: Vec<f32> = (0..rows).map(|_| unit() as f32).collect();
    let i16s: Vec<i16> = (0..rows).map(|_| (unit() * 200.0 - 100.0).round() as i16).collect();
    let u8s: Vec<u8> = (0..rows).map(|_| (unit().clamp(0.0, 1.0) * 255.0).round() as u8).collect();
    let i64s: Vec<i64> = (0..rows).map(|_| (unit() * 1e12) as i64).collect();
    let days: Vec<i32> = (0..rows).map(|_| 18000 + (unit() * 1000.0) as i32).collect();
    let stamps: Vec<i64> = (0..rows).map(|_| 1_600_000_000_000_000 + (unit() * 1e15) as i64).collect();
    write_parquet(
        path,
        vec![
            ("f64", floats(f64s)),
            ("f32", Arc::new(Float32Array::from(f32s)) as ArrayRef),
            ("i16", Arc::new(Int16Array::from(i16s)) as ArrayRef),
            ("u8", Arc::new(UInt8Array::from(u8s)) as ArrayRef),
            ("i64", Arc::new(Int64Array::from(i64s)) as ArrayRef),
            ("day", Arc::new(Date32Array::from(days)) as ArrayRef),
            ("ts", Arc::new(TimestampMicrosecondArray::from(stamps)) as ArrayRef),
        ],
        rows / 3 + 1,
    );
    vec![
        ColumnBounds::new("f64", 0.0, 1.0).unwrap(),
        ColumnBounds::new("f32", 0.0, 1.0).unwrap(),
        ColumnBounds::new("i16", -100.0, 100.0).unwrap(),
        ColumnBounds::new("u8", 0.0, 255.0).unwrap(),
        ColumnBounds::new("i64", 0.0, 1e12).unwrap(),
        ColumnBounds::new("day", 18000.0, 19000.0).unwrap(),
        ColumnBounds::new("ts", 1.6e15, 2.6e15).unwrap(),
    ]
}

fn histogram<B: Binner>(source: &Source, bounds: &[ColumnBounds], geometry: CellGeometry, binner: &B) -> Vec<u64> {
    let names: Vec<String> = bounds.iter().map(|b| b.column.clone()).collect();
    let columns = source.numeric_columns(&names).unwrap();
    let axes = AxisPlan::for_geometry(&geometry, bounds);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let bar = Progress::hidden().phase("bin", 0, "rows");
    pool.install(|| scan_leaf_counts(source, &columns, &axes, NullPolicy::Error, binner, &bar, &mut Timings::default()))
        .unwrap()
        .0
}

fn cpu_methods() -> Vec<DepositMethod> {
    let mut methods = vec![DepositMethod::LookupTable];
    if DepositMethod::detect() != DepositMethod::LookupTable {
        methods.push(DepositMethod::detect());
    }
    methods
}

#[cfg(feature = "gpu")]
fn gpu_context() -> Option<dpsynth::binner::gpu::GpuContext> {
    use dpsynth::binner::gpu::{AdapterPolicy, GpuContext};
    let context = GpuContext::open(AdapterPolicy::AnyAdapter).expect("an adapter exists but cannot be opened");
    if context.is_none() {
        no_gpu_adapter("the GPU binner was NOT checked against the CPU");
    }
    context
}

#[test]
fn every_binner_gives_the_same_histogram() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("conformance.parquet");
    let all_bounds = conformance_table(&path, 30_000);
    let source = Source::open(&path).unwrap();
    #[cfg(feature = "gpu")]
    let gpu = gpu_context();
    #[cfg_attr(not(feature = "gpu"), allow(unused_mut))]
    let mut checked_gpu = 0;
    for dims in [1usize, 2, 3, 7] {
        for depth in [0u32, 1, 5, 12, 13, 20] {
            let bounds = &all_bounds[..dims];
            let geometry = CellGeometry::new(dims, depth);
            let reference =
                histogram(&source, bounds, geometry, &CpuBinner::with_method(geometry, DepositMethod::LookupTable));
            assert_eq!(reference.len(), 1 << depth);
            assert_eq!(reference.iter().sum::<u64>(), 30_000);
            for method in cpu_methods() {
                let binner = CpuBinner::with_method(geometry, method);
                assert_eq!(
                    histogram(&source, bounds, geometry, &binner),
                    reference,
                    "cpu {method:?} d={dims} r={depth}"
                );
            }
            #[cfg(feature = "gpu")]
            if let Some(context) = &gpu {
                let binner = dpsynth::binner::device::SharedGpuBinner::new(context, geometry).unwrap();
                assert_eq!(histogram(&source, bounds, geometry, &binner), reference, "gpu d={dims} r={depth}");
                checked_gpu += 1;
            }
        }
    }
    let _ = writeln!(std::io::stderr(), "binner conformance: GPU checked on {checked_gpu} geometries");
}

#[test]
fn synth_output_is_identical_on_cpu_and_gpu() {
    if !cfg!(feature = "gpu") {
        let _ = writeln!(std::io::stderr(), "SKIPPED: built without the gpu feature");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.parquet");
    let bounds = conformance_table(&input, 10_000);
    let run = |device: &str| {
        let output = dir.path().join(format!("out-{device}.parquet"));
        let report = dir.path().join(format!("report-{device}.json"));
        let mut args = vec![
            "synth",
            input.to_str().unwrap(),
            "--output",
            output.to_str().unwrap(),
            "--epsilon",
            "1",
            "--seed",
            "5",
        ];
        let bound_args: Vec<String> = bounds[..3].iter().map(|b| b.to_string()).collect();
        for bound in &bound_args {
            args.extend(["--bounds", bound.as_str()]);
        }
        let columns: Vec<&str> = bounds[..3].iter().map(|b| b.column.as_str()).collect();
        let columns = columns.join(",");
        args.extend(["--columns", columns.as_str()]);
        args.extend(["--device", device, "--quiet", "--report", report.to_str().unwrap()]);
        let result = dpsynth(&args);
        (result, output, report)
    };
    let (cpu, cpu_output, _) = run("cpu");
    assert_eq!(cpu.status.code(), Some(0), "{}", stderr(&cpu));
    let (gpu, gpu_output, gpu_report) = run("gpu");
    if gpu.status.code() == Some(2) && stderr(&gpu).contains("no GPU adapter") {
        no_gpu_adapter("--device gpu was NOT compared with --device cpu");
        return;
    }
    assert_eq!(gpu.status.code(), Some(0), "{}", stderr(&gpu));
    assert_eq!(read_parquet(&cpu_output), read_parquet(&gpu_output));
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(gpu_report).unwrap()).unwrap();
    assert!(report["device"].as_str().unwrap().starts_with("gpu: "), "the report must name the adapter");
}

/// Every mechanism and every path of the default honours `--device gpu` (the report names the adapter) or
/// refuses it by name with exit 2 and the way out (`--device cpu` or `auto`), whether or not an adapter
/// exists: a GPU request is never reported as, nor silently run as, a CPU run. At d = 3 with ε·n̂ large the
/// default cuts the dense leaves finer from sorted leaf codes, a CPU-only pass; psmm, covloss and microagg
/// bin on the CPU only; `stream` has no device at all.
#[test]
fn every_mechanism_honours_device_gpu_or_refuses_it_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.parquet");
    let bounds = conformance_table(&input, 20_000);
    let bound_args: Vec<String> = bounds.iter().map(|b| b.to_string()).collect();
    let columns = |dims: usize| bounds[..dims].iter().map(|b| b.column.as_str()).collect::<Vec<_>>().join(",");
    let (two, three, four) = (columns(2), columns(3), columns(4));
    let replace = ["--neighbours", "replace"];
    let binned = ["--bins", "f64=4", "--bins", "f32=4"];
    // (what runs, its flags, whether it may bin on a GPU)
    let cases: Vec<(&str, Vec<&str>, bool)> = vec![
        ("pmm", vec!["--mechanism", "pmm", "--columns", &two], true),
        ("auto, d = 2", vec!["--columns", &two], true),
        ("auto, d = 3, refined leaves from sorted codes", vec!["--epsilon", "8", "--columns", &three], false),
        ("auto, d = 3, small ε·n̂ (plain)", vec!["--epsilon", "0.05", "--columns", &three], true),
        ("auto, d = 4, marginals and pairs", vec!["--epsilon", "8", "--columns", &four], true),
        ("psmm", vec!["--mechanism", "psmm", "--columns", &two], false),
        ("lowdim", [&["--mechanism", "lowdim", "--columns", &three], &replace[..]].concat(), true),
        (
            "lowdim, inner psmm",
            [&["--mechanism", "lowdim", "--inner-mechanism", "psmm", "--columns", &three], &replace[..]].concat(),
            false,
        ),
        (
            "pe",
            [&["--mechanism", "pe", "--delta", "1e-6", "--pe-steps", "1", "--columns", &two], &replace[..]].concat(),
            true,
        ),
        ("covloss", [&["--mechanism", "covloss", "--columns", &two], &replace[..], &binned[..]].concat(), false),
        ("microagg", [&["--mechanism", "microagg", "--k", "10", "--columns", &two], &binned[..]].concat(), false),
    ];
    let mut adapter_missing = false;
    for (index, (name, flags, may_use_gpu)) in cases.into_iter().enumerate() {
        let output = dir.path().join(format!("out-{index}.parquet"));
        let report = dir.path().join(format!("report-{index}.json"));
        let mut args = vec!["synth", input.to_str().unwrap(), "--output", output.to_str().unwrap(), "--quiet"];
        args.extend(["--seed", "1", "--device", "gpu", "--report", report.to_str().unwrap()]);
        for bound in &bound_args {
            args.extend(["--bounds", bound.as_str()]);
        }
        // microagg releases no noise and refuses an ε.
        if !flags.contains(&"--epsilon") && !flags.contains(&"microagg") {
            args.extend(["--epsilon", "1"]);
        }
        args.extend(flags);
        let result = dpsynth(&args);
        let message = stderr(&result);
        if result.status.code() == Some(0) {
            assert!(may_use_gpu, "{name}: --device gpu ran where it should be refused");
            let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
            let device = report["device"].as_str().unwrap();
            assert!(device.starts_with("gpu: "), "{name}: --device gpu ran on: {device}");
            continue;
        }
        assert_eq!(result.status.code(), Some(2), "{name}: {message}");
        assert!(message.contains("--device gpu") && message.contains("give --device cpu or auto"), "{name}: {message}");
        assert!(!output.exists(), "{name}");
        if may_use_gpu {
            assert!(message.contains("no GPU adapter") || message.contains("no GPU support"), "{name}: {message}");
            adapter_missing = true;
        }
    }
    if adapter_missing {
        no_gpu_adapter("the mechanisms that bin on a GPU were only checked to refuse --device gpu by name");
    }
    // stream has no device: a GPU request is a usage error that names the flag.
    let state = dir.path().join("state");
    let out = dir.path().join("stream-out");
    let mut args = vec!["stream", input.to_str().unwrap(), "--state", state.to_str().unwrap(), "--epsilon", "1"];
    args.extend(["--bounds", bound_args[0].as_str(), "--release-at-end", "--output-dir", out.to_str().unwrap()]);
    args.extend(["--device", "gpu", "--quiet"]);
    let result = dpsynth(&args);
    assert_eq!(result.status.code(), Some(2), "{}", stderr(&result));
    assert!(stderr(&result).contains("'--device'"), "{}", stderr(&result));
    assert!(!state.exists());
}
