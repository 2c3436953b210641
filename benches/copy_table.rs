//! The copy floor of `synth`: read every column of a Parquet table with this crate's reader and write
//! the same rows and columns with its writer (the same row groups, encoding and compression as a
//! synthetic table), nothing else. scripts/bench_end_to_end.sh times it beside pyarrow's copy and
//! `synth`: a synth cannot be cheaper than reading its input and writing a table of the same size.
//!
//! Run: `cargo bench --bench copy_table -- INPUT OUTPUT` (OUTPUT is replaced).

use std::path::PathBuf;

use dpsynth::io::sink::ParquetSink;
use dpsynth::io::source::Source;
use dpsynth::io::staging::commit_all;
use rayon::prelude::*;

fn main() {
    let paths: Vec<PathBuf> = std::env::args_os().skip(1).filter(|arg| arg != "--bench").map(PathBuf::from).collect();
    let [input, output] = paths.as_slice() else {
        eprintln!("usage: copy_table INPUT OUTPUT");
        std::process::exit(2);
    };
    let source = Source::open(input).expect("the input opens");
    let fields = source.schema().fields().len();
    let mut sink = ParquetSink::create_with_schema(output, source.schema().clone()).expect("the output opens");
    // Row groups decode in parallel, a window of them at a time so that memory stays a few row
    // groups; they are written in order, each batch's columns encoded in parallel by the sink.
    let window = rayon::current_num_threads().max(1);
    let groups: Vec<usize> = (0..source.row_group_count()).collect();
    for chunk in groups.chunks(window) {
        let decoded: Vec<Vec<_>> = chunk
            .par_iter()
            .map(|&group| {
                let reader = source.row_group_reader_of(group, 0..fields).expect("the reader builds");
                reader.map(|batch| batch.expect("the batch decodes")).collect()
            })
            .collect();
        for batch in decoded.iter().flatten() {
            sink.write_batch(batch).expect("the batch is written");
        }
    }
    let staged = sink.finish(&[]).expect("the output is finished");
    commit_all(vec![staged]).expect("the output is moved into place");
}
