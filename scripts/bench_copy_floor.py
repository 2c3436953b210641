"""Helpers of scripts/bench_end_to_end.sh (pyarrow only).

  copy IN OUT                     pyarrow's copy of every column: read_table + write_table, uncompressed
                                  like a synthetic table, threads on; prints "wall cpu" seconds measured
                                  inside the process (interpreter start and import left out: a stricter floor)
  mixed ROWS COLUMNS COMPRESSION OUT CONFIG
                                  a mixed table of COLUMNS columns cycling through float64, a string
                                  category of 8 values, Boolean and nullable float64 (10% nulls), written
                                  by row groups of 2^20 rows; CONFIG gets its public bounds and categories
"""
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

CATEGORIES = [f"c{k}" for k in range(8)]
ROW_GROUP = 1 << 20


def copy(source, target):
    wall, cpu = time.perf_counter(), time.process_time()
    table = pq.read_table(source, use_threads=True)
    pq.write_table(table, target, compression="none", use_dictionary=False, write_statistics=False,
                   row_group_size=ROW_GROUP)
    print(f"{time.perf_counter() - wall:.3f} {time.process_time() - cpu:.3f}")


def mixed_column(kind, rows, rng):
    if kind == 0:
        return pa.array(rng.random(rows))
    if kind == 1:
        return pa.DictionaryArray.from_arrays(pa.array(rng.integers(0, 8, rows, dtype=np.int8)),
                                              pa.array(CATEGORIES)).cast(pa.string())
    if kind == 2:
        return pa.array(rng.random(rows) < 0.3)
    return pa.array(rng.random(rows), mask=rng.random(rows) < 0.1)


def mixed(rows, columns, compression, target, config):
    rng = np.random.default_rng(0)
    names = [f"m{k}" for k in range(columns)]
    writer = None
    for start in range(0, rows, ROW_GROUP):
        count = min(ROW_GROUP, rows - start)
        batch = pa.table({name: mixed_column(k % 4, count, rng) for k, name in enumerate(names)})
        if writer is None:
            writer = pq.ParquetWriter(target, batch.schema, compression=compression)
        writer.write_table(batch, row_group_size=ROW_GROUP)
    writer.close()
    with open(config, "w") as out:
        out.write("[bounds]\n")
        out.writelines(f"{name} = [0, 1]\n" for k, name in enumerate(names) if k % 4 in (0, 3))
        out.write("[categories]\n")
        listed = ", ".join(f'"{value}"' for value in CATEGORIES)
        out.writelines(f"{name} = [{listed}]\n" for k, name in enumerate(names) if k % 4 == 1)


if __name__ == "__main__":
    if sys.argv[1] == "copy":
        copy(sys.argv[2], sys.argv[3])
    else:
        mixed(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6])
