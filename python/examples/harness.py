"""One harness, two libraries: dpsynth beside smartnoise-synth's MST on the bundled flights table.

The harness below is written the way benchmark scripts drive smartnoise-synth (create, fit, sample);
dpsynth's Synthesizer runs through the same lines. Only what each library needs to know about the columns
differs: dpsynth takes the PUBLIC bounds; MST synthesises categories, so it gets the same bounds as equal
bins (smartnoise's BinTransformer with lower/upper given spends no budget) and answers with bin centres.
W1 of each output against the real table comes from dpsynth.evaluate (normalised l-infinity units; owner
only: it reads the real data).

Run it in an environment with both packages (smartnoise-synth pulls in PyTorch):
    python -m venv .venv && .venv/bin/pip install smartnoise-synth==1.0.8 ./python
    .venv/bin/python python/examples/harness.py [--epsilon 1] [--columns dep_delay,arr_delay]
"""

import argparse
import time
from pathlib import Path

import pyarrow.parquet as pq

import dpsynth

ROOT = Path(__file__).resolve().parents[2]
BOUNDS = {"dep_delay": (-120, 1440), "arr_delay": (-120, 1440), "air_time": (0, 720), "distance": (0, 5000)}
BINS = 64


def harness(synthesizer, frame, **fit_options):
    """Fit once, sample as many rows as the real table: the lines a benchmark writes for any peer."""
    started = time.perf_counter()
    synthesizer.fit(frame, **fit_options)
    rows = synthesizer.sample(len(frame))
    return rows, time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--columns", default="dep_delay,arr_delay")
    arguments = parser.parse_args()
    columns = arguments.columns.split(",")
    bounds = {column: BOUNDS[column] for column in columns}
    frame = pq.read_table(ROOT / "datasets" / "flights.parquet", columns=columns).to_pandas()

    results = {}
    synthesizer = dpsynth.Synthesizer.create("pmm", epsilon=arguments.epsilon)
    results["dpsynth pmm"] = harness(synthesizer, frame, bounds=bounds)

    try:
        from snsynth import Synthesizer
        from snsynth.transform import BinTransformer, TableTransformer
    except ImportError:
        print("smartnoise-synth is not installed: dpsynth only")
    else:
        transformer = TableTransformer([BinTransformer(bins=BINS, lower=lo, upper=hi) for lo, hi in bounds.values()])
        synthesizer = Synthesizer.create("mst", epsilon=arguments.epsilon, verbose=False)
        results["smartnoise mst"] = harness(synthesizer, frame, transformer=transformer, preprocessor_eps=0.0)

    print(f"flights, {len(frame)} rows, columns {', '.join(columns)}, epsilon {arguments.epsilon}")
    print(f"{'method':<16} {'W1 (normalised)':>16} {'seconds':>8}")
    for name, (rows, seconds) in results.items():
        w1 = dpsynth.evaluate(frame, rows.astype(frame.dtypes.to_dict()), bounds=bounds, subsample_repeats=0)["w1"]
        print(f"{name:<16} {w1['value']:>16.5f} {seconds:>8.2f}")


if __name__ == "__main__":
    main()
