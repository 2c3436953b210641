"""The Python package against the CLI it wraps: same seeded tables, same reports, the documented errors,
one spend per fit, no read of the data after fit, the GIL released and Ctrl-C honoured.

The CLI is the release binary `cargo test --release` builds (target/release/dpsynth), or $DPSYNTH_CLI.
"""

import _thread
import json
import os
import signal
import subprocess
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpsynth

REPO = Path(__file__).resolve().parents[2]
BOUNDS = {"x": (0.0, 1.0), "y": (-50, 50), "z": (0.0, 10.0)}


@pytest.fixture(scope="session")
def cli() -> str:
    path = Path(os.environ.get("DPSYNTH_CLI", REPO / "target" / "release" / "dpsynth"))
    assert path.exists(), f"{path} is missing: build it with `cargo build --release` (or set DPSYNTH_CLI)"
    return str(path)


def table(rows: int = 20_000, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    x = rng.beta(2, 5, rows)
    return pa.table({
        "x": x,
        "y": np.clip(np.round(rng.normal(0, 15, rows)), -50, 50).astype(np.int32),
        "z": (x * 10 + rng.random(rows)).clip(0, 10).astype(np.float32),
    })


def cli_synth(cli: str, data: pa.Table, tmp_path: Path, *words: str) -> tuple:
    source = tmp_path / "input.parquet"
    pq.write_table(data, source)
    output, report = tmp_path / "cli.parquet", tmp_path / "cli.json"
    bounds = [f"--bounds={column}={lo}:{hi}" for column, (lo, hi) in BOUNDS.items()]
    subprocess.run([cli, "synth", str(source), "--output", str(output), "--report", str(report), "--quiet",
                    *bounds, *words], check=True)
    return pq.read_table(output), json.loads(report.read_text()), source


def without_input(report: dict) -> dict:
    """The report but for where the input came from (a file for the CLI, a data frame here)."""
    return {key: value for key, value in report.items() if key != "input"}


@pytest.mark.parametrize("mechanism", [["--mechanism", "pmm"], ["--mechanism", "psmm"],
                                       ["--mechanism", "pmm", "--neighbours", "replace", "--rows", "5000"]])
def test_every_input_kind_gives_the_cli_table(cli, tmp_path, mechanism):
    data = table()
    expected, expected_report, source = cli_synth(cli, data, tmp_path, "--epsilon", "0.5", "--seed", "7", *mechanism)
    keywords = dict(zip([word.lstrip("-").replace("-", "_") for word in mechanism[::2]], mechanism[1::2]))
    for given in [data, data.to_pandas(), pl.from_arrow(data), pa.RecordBatchReader.from_batches(data.schema,
                  data.to_batches(max_chunksize=3000)), source, str(source)]:
        synthetic, report = dpsynth.synthesize(given, epsilon=0.5, bounds=BOUNDS, seed=7, quiet=True, **keywords)
        assert synthetic.equals(expected), type(given)
        assert without_input(report) == without_input(expected_report), type(given)
        assert report["input"]["columns"] == expected_report["input"]["columns"]


def test_types_and_names_round_trip():
    rows = 5000
    rng = np.random.default_rng(1)
    columns = {
        "int8 col": pa.array(rng.integers(-100, 100, rows), pa.int8()),
        "uint16": pa.array(rng.integers(0, 60000, rows), pa.uint16()),
        "i64": pa.array(rng.integers(-10**6, 10**6, rows), pa.int64()),
        "u64": pa.array(rng.integers(0, 10**9, rows), pa.uint64()),
        "f32": pa.array(rng.random(rows), pa.float32()),
        "día": pa.array(rng.integers(18000, 19000, rows).astype(np.int32), pa.date32()),
        "when": pa.array(rng.integers(0, 10**12, rows), pa.timestamp("ms")),
        "clock": pa.array(rng.integers(0, 86400, rows).astype(np.int32), pa.time32("s")),
        "wait": pa.array(rng.integers(0, 10**9, rows), pa.duration("us")),
    }
    bounds = {"int8 col": (-100, 100), "uint16": (0, 60000), "i64": (-10**6, 10**6), "u64": (0, 10**9),
              "f32": (0, 1), "día": (18000, 19000), "when": (0, 10**12), "clock": (0, 86399), "wait": (0, 10**9)}
    data = pa.table(columns)
    synthetic, report = dpsynth.synthesize(data, epsilon=1.0, bounds=bounds, seed=1, quiet=True)
    assert synthetic.schema.names == data.schema.names
    assert synthetic.schema.types == data.schema.types
    assert synthetic.num_rows == report["release"]["synthetic_rows"] > 0
    for name, (lo, hi) in bounds.items():
        narrow = name in ("día", "clock")
        values = synthetic.column(name).cast(pa.float64() if name == "f32" else pa.int64()) if name not in (
            "día", "when", "clock", "wait") else synthetic.column(name).cast(pa.int32() if narrow else pa.int64())
        assert lo <= pa.compute.min(values).as_py() and pa.compute.max(values).as_py() <= hi, name


def test_bad_input_names_the_column():
    data = table(2000)
    with pytest.raises(ValueError, match="column 'missing': no such column"):
        dpsynth.synthesize(data, epsilon=1.0, bounds={"missing": (0, 1)})
    labelled = data.append_column("label", pa.array(["a"] * len(data)))
    with pytest.raises(ValueError, match="column 'label'.*type"):
        dpsynth.synthesize(labelled, epsilon=1.0, bounds={"label": (0, 1)})
    with pytest.raises(ValueError, match="no public domain: label"):
        dpsynth.synthesize(labelled, epsilon=1.0, bounds=BOUNDS)
    holes = pa.table({"x": pa.array([0.5, None, 0.25] * 100)})
    with pytest.raises(ValueError, match="column 'x': a null"):
        dpsynth.synthesize(holes, epsilon=1.0, bounds={"x": (0, 1)}, nulls="error")
    with pytest.raises(ValueError, match="unknown keyword 'depht'"):
        dpsynth.synthesize(data, epsilon=1.0, bounds=BOUNDS, depht=3)
    with pytest.raises(TypeError, match="got builtins.dict"):
        dpsynth.synthesize({"x": [1.0]}, epsilon=1.0, bounds={"x": (0, 1)})
    with pytest.raises(ValueError, match="no-such.parquet"):
        dpsynth.synthesize("no-such.parquet", epsilon=1.0, bounds=BOUNDS)


def test_requests_that_break_the_guarantee_raise_privacy_error():
    data = table(2000)
    for keywords in [dict(epsilon=0.0), dict(epsilon=float("inf")),
                     dict(epsilon=1.0, neighbours="replace", nulls="drop"),
                     dict(epsilon=1.0, mechanism="lowdim")]:
        with pytest.raises(dpsynth.PrivacyError):
            dpsynth.synthesize(data, bounds=BOUNDS, **keywords)
    assert issubclass(dpsynth.PrivacyError, ValueError)
    synthesizer = dpsynth.Synthesizer("pmm", epsilon=1.0, seed=1).fit(data, bounds=BOUNDS)
    with pytest.raises(dpsynth.PrivacyError, match="spend epsilon again"):
        synthesizer.fit(data, bounds=BOUNDS)


def test_config_file_and_keywords_read_as_the_command_line(tmp_path):
    config = tmp_path / "run.toml"
    config.write_text('epsilon = 0.5\nmechanism = "psmm"\ncolumns = ["x"]\n[bounds]\nx = [0, 1]\n')
    synthetic, report = dpsynth.synthesize(table(3000), config=config, seed=2, quiet=True)
    assert report["mechanism"] == "psmm" and synthetic.schema.names == ["x"]
    # A keyword wins over the file, as a flag does.
    _, report = dpsynth.synthesize(table(3000), config=config, mechanism="pmm", seed=2, quiet=True)
    assert report["mechanism"] == "pmm"


def test_private_bounds_are_a_keyword_as_on_the_command_line():
    data = table(20_000)
    _, report = dpsynth.synthesize(data, epsilon=1.0, bounds={"z": (0.0, 10.0)}, private_bounds=0.1, seed=3)
    assert [column["column"] for column in report["private_bounds"]["columns"]] == ["x", "y"]
    spent = [part["epsilon"] for part in report["guarantee"]["epsilon_breakdown"]
             if part["release"].startswith("bounds of")]
    assert len(spent) == 4 and 0.1 - 1e-6 < sum(spent) <= 0.1
    labelled = data.append_column("label", pa.array(["a"] * len(data)))
    with pytest.raises(ValueError, match="needs a delta > 0"):
        dpsynth.synthesize(labelled, epsilon=1.0, private_bounds=0.1)


def test_fit_spends_once_and_sampling_never_reads_the_data():
    frame = table(20_000).to_pandas()
    fitted = dpsynth.Synthesizer.create("pmm", epsilon=1.0, seed=5).fit(frame, bounds=BOUNDS)
    spent = fitted.report["guarantee"]["epsilon_spent"]
    assert 0 < spent <= 1.0 and "sample" not in fitted.report
    # The data changes after fit: a release that read it again would change too.
    reference = dpsynth.Synthesizer.create("pmm", epsilon=1.0, seed=5).fit(frame.copy(), bounds=BOUNDS)
    frame["x"] = 0.0
    frame["y"] = 0
    draws = []
    for draw in range(3):
        sample = fitted.sample(1000)
        assert isinstance(sample, pd.DataFrame) and len(sample) == 1000
        assert fitted.report["sample"] == {**fitted.report["sample"], "draw": draw, "epsilon_spent_by_this_draw": 0.0}
        assert fitted.report["guarantee"]["epsilon_spent"] == spent
        pd.testing.assert_frame_equal(sample, reference.sample(1000))
        draws.append(sample)
    assert not draws[0].equals(draws[1]), "each draw has its own placement coins"
    assert fitted.sample().shape[0] == fitted.report["release"]["root_count"]


def test_the_first_draw_is_the_cli_table(cli, tmp_path):
    data = table()
    expected, _, _ = cli_synth(cli, data, tmp_path, "--epsilon", "1", "--seed", "11", "--rows", "3000")
    fitted = dpsynth.Synthesizer(epsilon=1.0, seed=11, quiet=True).fit(pl.from_arrow(data), bounds=BOUNDS)
    # polars keeps the values and types; it does not keep Arrow's not-null flag.
    assert fitted.sample(3000).to_arrow().cast(expected.schema).equals(expected)


def test_covloss_and_microagg_are_fitted_once_and_sampled_like_the_others(cli, tmp_path):
    rng = np.random.default_rng(3)
    rows = 20_000
    carrier = rng.choice(["AA", "B6", "UA"], rows, p=[0.5, 0.3, 0.2])
    data = pa.table({"delayed": rng.random(rows) < np.where(carrier == "AA", 0.4, 0.1), "carrier": carrier,
                     "x": rng.random(rows)})
    encoding = dict(columns=["delayed", "carrier", "x"], categories={"carrier": ["AA", "B6", "UA"]}, bins={"x": 4},
                    bounds={"x": (0.0, 1.0)})
    source, output = tmp_path / "input.parquet", tmp_path / "cli.parquet"
    pq.write_table(data, source)
    subprocess.run([cli, "synth", str(source), "--output", str(output), "--quiet", "--columns", "delayed,carrier,x",
                    "--categories", "carrier=AA,B6,UA", "--bins", "x=4", "--bounds", "x=0:1", "--mechanism", "covloss",
                    "--epsilon", "1", "--neighbours", "replace", "--damping", "cells", "--seed", "4"], check=True)
    fitted = dpsynth.Synthesizer.create("covloss", epsilon=1.0, neighbours="replace", damping="cells", seed=4,
                                        quiet=True).fit(data, **encoding)
    assert fitted.report["mechanism"] == "covloss" and fitted.report["guarantee"]["epsilon_spent"] <= 1.0
    first = fitted.sample()
    assert first.equals(pq.read_table(output)), "draw 0 is the CLI's table"
    second = fitted.sample(5000)
    assert second.schema == first.schema and second.num_rows == 5000
    assert set(second.column("carrier").to_pylist()) <= {"AA", "B6", "UA"}
    assert fitted.report["sample"]["draw"] == 1 and fitted.report["sample"]["epsilon_spent_by_this_draw"] == 0.0
    assert not second.equals(first.slice(0, 5000)), "each draw has its own coins"
    anonymous = dpsynth.Synthesizer.create("microagg", k=100, quiet=True).fit(data, **encoding)
    assert anonymous.report["guarantee"]["fit_for_release"] is False and "anonymity" in anonymous.report["guarantee"]
    assert anonymous.sample(1000).num_rows == 1000


def test_evaluate_matches_the_cli(cli, tmp_path):
    data = table()
    synthetic, _, source = cli_synth(cli, data, tmp_path, "--epsilon", "1", "--seed", "3")
    expected = tmp_path / "eval.json"
    bounds = [f"--bounds={column}={lo}:{hi}" for column, (lo, hi) in BOUNDS.items()]
    subprocess.run([cli, "eval", "--real", str(source), "--synth", str(tmp_path / "cli.parquet"), "--json",
                    str(expected), "--quiet", *bounds], check=True)
    expected = json.loads(expected.read_text())
    got = dpsynth.evaluate(data.to_pandas(), synthetic, bounds=BOUNDS)
    assert got["w1"] == expected["w1"] and got["columns"] == expected["columns"]
    report_dir = tmp_path / "page"
    dpsynth.evaluate(source, [synthetic, pl.from_arrow(synthetic)], bounds=BOUNDS, report_dir=report_dir)
    assert (report_dir / "index.html").exists()


def big_table(rows: int = 3_000_000) -> pa.Table:
    rng = np.random.default_rng(3)
    return pa.table({"x": rng.random(rows), "z": rng.random(rows) * 10})


def test_the_gil_is_released_during_a_run():
    data, ticks, running = big_table(), [0], threading.Event()
    running.set()

    def count():
        while running.is_set():
            ticks[0] += 1

    counter = threading.Thread(target=count)
    counter.start()
    before = ticks[0]
    dpsynth.synthesize(data, epsilon=1.0, bounds={"x": (0, 1), "z": (0, 10)}, threads=1, quiet=True)
    during = ticks[0] - before
    running.clear()
    counter.join()
    # Holding the GIL for the run would freeze the counter (a few ticks at most before the call).
    assert during > 10_000, during


def test_ctrl_c_stops_a_run(monkeypatch):
    data = big_table()
    binned = []

    class InterruptAtStart:
        def __call__(self, event, phase, amount, unit):
            if event == "start" and phase == "bin":
                _thread.interrupt_main()
            if event == "advance" and phase == "bin":
                binned.append(amount)

    monkeypatch.setattr(dpsynth, "_progress", lambda quiet: InterruptAtStart())
    # interrupt_main does nothing while SIGINT is ignored, as it is for a background job of a
    # non-interactive shell (how CI scripts often start the suite): give SIGINT Python's own handler.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            dpsynth.synthesize(data, epsilon=1.0, bounds={"x": (0, 1), "z": (0, 10)}, threads=1)
    finally:
        signal.signal(signal.SIGINT, inherited)
    # Stopped at a batch boundary, long before the pass ended.
    assert sum(binned) < data.num_rows // 4, sum(binned)


def test_a_saved_release_loads_and_samples_as_the_cli_sample_of_the_same_file(cli, tmp_path):
    data = table()
    fitted = dpsynth.Synthesizer(epsilon=1.0, seed=11, quiet=True).fit(data, bounds=BOUNDS)
    release_report = fitted.report
    path = tmp_path / "release.dpr"
    fitted.save(path)
    loaded = dpsynth.load(path, seed=11, quiet=True)
    assert loaded.report == release_report and loaded.mechanism == release_report["mechanism"]
    drawn = loaded.sample(3000)
    assert loaded.report["sample"]["saved_release"] == str(path)
    assert loaded.report["sample"]["epsilon_spent_by_this_draw"] == 0.0
    output = tmp_path / "sampled.parquet"
    subprocess.run([cli, "sample", str(path), "--seed", "11", "--rows", "3000", "--output", str(output), "--quiet"],
                   check=True)
    assert drawn.equals(pq.read_table(output)), "load then sample is the CLI's sample of the same file"
    assert fitted.sample(3000).equals(drawn), "and the fitted release's own first draw"
    # A release the CLI saved loads here: its first draw with synth's seed is synth's table.
    expected, _, _ = cli_synth(cli, data, tmp_path, "--epsilon", "1", "--seed", "4", "--save-release",
                                    str(tmp_path / "cli.dpr"))
    assert dpsynth.Synthesizer.load(tmp_path / "cli.dpr", seed=4).sample().equals(expected)


def test_a_damaged_saved_release_is_refused_by_name(tmp_path):
    fitted = dpsynth.Synthesizer(epsilon=1.0, quiet=True).fit(table(2000), bounds=BOUNDS)
    path = tmp_path / "release.dpr"
    fitted.save(path)
    damaged = bytearray(path.read_bytes())
    damaged[len(damaged) // 2] ^= 1
    (tmp_path / "damaged.dpr").write_bytes(bytes(damaged))
    with pytest.raises(ValueError, match="damaged.dpr: damaged: its checksum"):
        dpsynth.load(tmp_path / "damaged.dpr")
    with pytest.raises(ValueError, match="not a dpsynth saved release"):
        dpsynth.load(__file__)
