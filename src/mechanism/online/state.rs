//! The resumable state of a stream (docs/mechanisms/online.md, "State file"): the parameters it was
//! started with, the noise key and post-processing seeds, the files already read, and the tree of
//! counters. It is **sensitive**: it holds exact counts of the current level and the noise key.
//!
//! Format, little-endian throughout, one fixed layout (no self-describing overhead). A cell's fields are
//! varints (LEB128; signed ones zigzag-coded), since nearly all are small: 9 bytes at least, about 14
//! for a quiet cell (its decided step is the one large number), more with a Binary Mechanism:
//!
//! ```text
//! magic "DPSYNTH-ONLINE\0\0" (16 B) | version u32
//! epsilon f64 | columns u32, each: name str, type str, lo f64, hi f64 | seed flag u8 (+ u64)
//! noise key [32 B] | consistency seed u64 | placement seed u64
//! files u32, each: path str, bytes u64, rows u64, footer hash u64
//! position u64 | depth u32 | per depth j = 1..depth, 2^j cells, each (varints):
//!     S̃ i, level count u, segment count u, threshold noise i, closed output i, noise words u,
//!     checks decided through u, closing step + 1 u (0: none),
//!     Binary Mechanism levels u8 (0: none), then steps u and L p-sums i and L noisy p-sums i
//! history u64 count, then u32 codes (d = 1 only; 0 otherwise)
//! checksum u64: FNV-1a 64 of every byte before it
//! ```
//! A str is a u32 length and UTF-8 bytes. The file is written to a temporary file and renamed.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use crate::error::{Error, Result};
use crate::io::staging::{commit_all, StagedFile};
use crate::mechanism::online::counter::{BinaryMechanism, SparseCounter};
use crate::mechanism::online::{Cell, OnlinePlan, OnlineTree, MAX_ONLINE_DEPTH};

const MAGIC: &[u8; 16] = b"DPSYNTH-ONLINE\0\0";
/// Bumped whenever the layout changes; an older or newer file is refused, never misread.
pub const STATE_VERSION: u32 = 3;

/// One column of the stream, as the state remembers it.
#[derive(Clone, Debug, PartialEq)]
pub struct StateColumn {
    pub name: String,
    /// The Arrow type, as written by its Display (the output keeps it).
    pub data_type: String,
    pub lo: f64,
    pub hi: f64,
}

/// What a continuation must repeat exactly.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamParameters {
    pub epsilon: f64,
    pub columns: Vec<StateColumn>,
    pub seed: Option<u64>,
}

impl StreamParameters {
    /// What differs between the parameters a state was made with (`self`) and those given now, one
    /// phrase per difference.
    pub fn differences(&self, given: &StreamParameters) -> Vec<String> {
        let mut differences = Vec::new();
        if self.epsilon.to_bits() != given.epsilon.to_bits() {
            differences.push(format!("--epsilon {} (the state has {})", given.epsilon, self.epsilon));
        }
        if self.columns.len() != given.columns.len() {
            differences.push(format!(
                "{} columns, so d = {} (the state has d = {})",
                given.columns.len(),
                given.columns.len(),
                self.columns.len()
            ));
        }
        for (saved, now) in self.columns.iter().zip(&given.columns) {
            if saved.name != now.name {
                differences.push(format!("column '{}' (the state has '{}')", now.name, saved.name));
            } else {
                if saved.lo.to_bits() != now.lo.to_bits() || saved.hi.to_bits() != now.hi.to_bits() {
                    differences.push(format!(
                        "--bounds {}={}:{} (the state has {}:{})",
                        now.name, now.lo, now.hi, saved.lo, saved.hi
                    ));
                }
                if saved.data_type != now.data_type {
                    differences.push(format!(
                        "column '{}' of type {} (the state has {})",
                        now.name, now.data_type, saved.data_type
                    ));
                }
            }
        }
        if self.seed != given.seed {
            let show = |seed: Option<u64>| seed.map_or("no --seed".to_string(), |seed| format!("--seed {seed}"));
            differences.push(format!("{} (the state has {})", show(given.seed), show(self.seed)));
        }
        differences
    }
}

/// A file already read into the stream: refused if given again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileFingerprint {
    /// The canonical path when it was read.
    pub path: String,
    pub bytes: u64,
    pub rows: u64,
    /// FNV-1a 64 of the file's last [`FOOTER_BYTES`] bytes (the Parquet footer and metadata).
    pub footer_hash: u64,
}

/// Bytes at the end of a file hashed into its fingerprint.
pub const FOOTER_BYTES: usize = 1 << 18;

impl FileFingerprint {
    /// Whether `other` is the same file (same path) or a copy of it (same size and footer).
    pub fn same_file(&self, other: &FileFingerprint) -> bool {
        self.path == other.path || (self.bytes == other.bytes && self.footer_hash == other.footer_hash)
    }
}

/// Everything needed to continue a stream.
#[derive(Clone, Debug, PartialEq)]
pub struct OnlineState {
    pub parameters: StreamParameters,
    pub noise_key: [u8; 32],
    pub consistency_seed: u64,
    pub placement_seed: u64,
    pub consumed: Vec<FileFingerprint>,
    pub tree: OnlineTree,
}

impl OnlineState {
    /// Reads the state at `path`, or `None` if there is no file there. Streamed from the file, like
    /// [`OnlineState::save`].
    pub fn load(path: &Path) -> Result<Option<Self>> {
        let cannot = |error: std::io::Error| Error::in_file(path, format!("cannot read the state: {error}"));
        let file = match File::open(path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(cannot(error)),
        };
        let length = file.metadata().map_err(cannot)?.len();
        Self::read_from(BufReader::with_capacity(1 << 20, file), length)
            .map(Some)
            .map_err(|reason| Error::in_file(path, format!("not a valid dpsynth stream state: {reason}")))
    }

    /// Writes the state atomically (temporary file, then rename): a crash leaves the old state or the new.
    /// Streamed to the file: a state of 10^8 elements is several GB, which must not be held twice.
    pub fn save(&self, path: &Path) -> Result<()> {
        let staged = StagedFile::new(path)?;
        let cannot = |error: std::io::Error| Error::in_file(path, format!("cannot write the state: {error}"));
        let file = File::create(staged.temporary()).map_err(cannot)?;
        self.write_to(BufWriter::with_capacity(1 << 20, file))
            .and_then(|out| out.into_inner().map_err(|error| error.into_error()))
            .map_err(cannot)?;
        commit_all(vec![staged])
    }

    /// The state's bytes (what [`OnlineState::save`] writes).
    #[cfg(any(test, feature = "internals"))]
    pub fn encode(&self) -> Vec<u8> {
        self.write_to(Vec::new()).expect("writing to memory cannot fail")
    }

    fn write_to<W: Write>(&self, sink: W) -> std::io::Result<W> {
        let mut out = Writer::new(sink);
        out.bytes(MAGIC);
        out.u32(STATE_VERSION);
        let parameters = &self.parameters;
        out.f64(parameters.epsilon);
        out.u32(parameters.columns.len() as u32);
        for column in &parameters.columns {
            out.str(&column.name);
            out.str(&column.data_type);
            out.f64(column.lo);
            out.f64(column.hi);
        }
        match parameters.seed {
            Some(seed) => {
                out.u8(1);
                out.u64(seed);
            }
            None => out.u8(0),
        }
        out.bytes(&self.noise_key);
        out.u64(self.consistency_seed);
        out.u64(self.placement_seed);
        out.u32(self.consumed.len() as u32);
        for file in &self.consumed {
            out.str(&file.path);
            out.u64(file.bytes);
            out.u64(file.rows);
            out.u64(file.footer_hash);
        }
        let tree = &self.tree;
        out.u64(tree.position());
        out.u32(tree.depth());
        for cells in tree.cells() {
            for cell in cells {
                let counter = &cell.counter;
                out.signed(counter.noisy_past_levels);
                out.varint(counter.level_count);
                out.varint(counter.segment_count);
                out.signed(counter.threshold_noise);
                out.signed(counter.closed_segments_output);
                out.varint(cell.noise_words);
                out.varint(counter.decided_through);
                out.varint(counter.closing_step.wrapping_add(1));
                match &counter.binary {
                    None => out.u8(0),
                    Some(binary) => {
                        out.u8(binary.partial_sums().len() as u8);
                        out.varint(binary.steps());
                        binary.partial_sums().iter().for_each(|&sum| out.signed(sum));
                        binary.noisy_partial_sums().iter().for_each(|&sum| out.signed(sum));
                    }
                }
            }
        }
        out.u64(tree.history().len() as u64);
        for &code in tree.history() {
            out.u32(code);
        }
        out.finish()
    }

    /// Parses a state; the error says what is wrong (the caller names the file).
    #[cfg(any(test, feature = "internals"))]
    pub fn decode(bytes: &[u8]) -> std::result::Result<Self, String> {
        Self::read_from(bytes, bytes.len() as u64)
    }

    /// Parses the `length` bytes of a state from `source`. Every count read is checked against the bytes
    /// left before anything is allocated for it, and the checksum at the end covers every field.
    fn read_from<R: Read>(source: R, length: u64) -> std::result::Result<Self, String> {
        let body = length
            .checked_sub(8)
            .filter(|&body| body >= (MAGIC.len() + 4) as u64)
            .ok_or("it is too short to be a state file")?;
        let mut input = Reader {
            source,
            left: body,
            hash: FNV_OFFSET,
        };
        if input.take(MAGIC.len())? != MAGIC {
            return Err("it does not start with the state file's magic bytes".into());
        }
        let state = Self::read_fields(&mut input)?;
        input.check_sum()?;
        Ok(state)
    }

    fn read_fields<R: Read>(input: &mut Reader<R>) -> std::result::Result<Self, String> {
        let version = input.u32()?;
        if version != STATE_VERSION {
            return Err(format!("it has format version {version}; this dpsynth reads version {STATE_VERSION}"));
        }
        let epsilon = input.f64()?;
        let dims = input.u32()? as usize;
        let mut columns = Vec::new();
        for _ in 0..dims {
            columns.push(StateColumn {
                name: input.str()?,
                data_type: input.str()?,
                lo: input.f64()?,
                hi: input.f64()?,
            });
        }
        let seed = match input.u8()? {
            0 => None,
            1 => Some(input.u64()?),
            other => return Err(format!("bad seed flag {other}")),
        };
        let noise_key: [u8; 32] = input.take(32)?.try_into().expect("32 bytes");
        let consistency_seed = input.u64()?;
        let placement_seed = input.u64()?;
        let files = input.u32()?;
        let mut consumed = Vec::new();
        for _ in 0..files {
            consumed.push(FileFingerprint {
                path: input.str()?,
                bytes: input.u64()?,
                rows: input.u64()?,
                footer_hash: input.u64()?,
            });
        }
        let plan = OnlinePlan::new(epsilon, dims).map_err(|error| error.to_string())?;
        let position = input.u64()?;
        let depth = input.u32()?;
        let expected_depth = if position == 0 { 0 } else { plan.level_at(position) };
        if depth > MAX_ONLINE_DEPTH || depth != expected_depth {
            return Err(format!("depth {depth} does not match t = {position}"));
        }
        let mut cells = Vec::with_capacity(depth as usize);
        for level in 1..=depth {
            let count = 1usize << level;
            // Each cell takes at least 9 bytes: refuse before allocating for a short file.
            if input.left() < count as u64 * 9 {
                return Err("it ends inside the tree of counters".into());
            }
            let mut row = Vec::with_capacity(count);
            for _ in 0..count {
                let mut counter = SparseCounter {
                    noisy_past_levels: input.signed()?,
                    level_count: input.varint()?,
                    segment_count: input.varint()?,
                    threshold_noise: input.signed()?,
                    closed_segments_output: input.signed()?,
                    binary: None,
                    ..SparseCounter::default()
                };
                let noise_words = input.varint()?;
                counter.decided_through = input.varint()?;
                counter.closing_step = input.varint()?.wrapping_sub(1);
                let levels = input.u8()?;
                if levels > 0 {
                    let steps = input.varint()?;
                    let sums = (0..levels).map(|_| input.signed()).collect::<std::result::Result<Vec<_>, _>>()?;
                    let noisy = (0..levels).map(|_| input.signed()).collect::<std::result::Result<Vec<_>, _>>()?;
                    counter.binary = Some(Box::new(
                        BinaryMechanism::from_parts(steps, sums, noisy)
                            .ok_or("a Binary Mechanism past its horizon")?,
                    ));
                }
                row.push(Cell { counter, noise_words });
            }
            cells.push(row);
        }
        let history_length = input.u64()?;
        if history_length.checked_mul(4) != Some(input.left()) {
            return Err("its history does not fill the rest of the file".into());
        }
        let history = (0..history_length).map(|_| input.u32()).collect::<std::result::Result<Vec<_>, _>>()?;
        let expected_history = if dims == 1 { position } else { 0 };
        if history_length != expected_history {
            return Err(format!("it holds {history_length} history codes for t = {position}"));
        }
        Ok(OnlineState {
            parameters: StreamParameters { epsilon, columns, seed },
            noise_key,
            consistency_seed,
            placement_seed,
            consumed,
            tree: OnlineTree::from_parts(plan, position, cells, history),
        })
    }
}

/// FNV-1a 64: detects damage and truncation (not an adversary: whoever can write the state can also
/// read the key it holds).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    fnv1a_continue(FNV_OFFSET, bytes)
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// The FNV-1a 64 hash of what `hash` covered followed by `bytes`.
fn fnv1a_continue(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Writes the fields and hashes them on the way; the first I/O error is kept for [`Writer::finish`].
struct Writer<W: Write> {
    sink: W,
    hash: u64,
    failed: Option<std::io::Error>,
}

impl<W: Write> Writer<W> {
    fn new(sink: W) -> Self {
        Writer {
            sink,
            hash: FNV_OFFSET,
            failed: None,
        }
    }

    /// Appends the checksum of every byte written and returns the sink.
    fn finish(mut self) -> std::io::Result<W> {
        let checksum = self.hash;
        self.bytes(&checksum.to_le_bytes());
        match self.failed {
            Some(error) => Err(error),
            None => Ok(self.sink),
        }
    }

    fn bytes(&mut self, bytes: &[u8]) {
        if self.failed.is_some() {
            return;
        }
        self.hash = fnv1a_continue(self.hash, bytes);
        if let Err(error) = self.sink.write_all(bytes) {
            self.failed = Some(error);
        }
    }
    fn u8(&mut self, value: u8) {
        self.bytes(&[value]);
    }
    fn u32(&mut self, value: u32) {
        self.bytes(&value.to_le_bytes());
    }
    fn u64(&mut self, value: u64) {
        self.bytes(&value.to_le_bytes());
    }
    fn f64(&mut self, value: f64) {
        self.bytes(&value.to_le_bytes());
    }
    fn str(&mut self, value: &str) {
        self.u32(value.len() as u32);
        self.bytes(value.as_bytes());
    }
    /// LEB128: seven bits a byte, low first, the high bit set on all but the last.
    fn varint(&mut self, mut value: u64) {
        let mut encoded = [0u8; 10];
        let mut length = 0;
        loop {
            let low = (value & 0x7f) as u8;
            value >>= 7;
            encoded[length] = low | if value == 0 { 0 } else { 0x80 };
            length += 1;
            if value == 0 {
                break;
            }
        }
        self.bytes(&encoded[..length]);
    }
    /// Zigzag (0, −1, 1, −2, … → 0, 1, 2, 3, …), then LEB128: small magnitudes take one byte.
    fn signed(&mut self, value: i64) {
        self.varint(((value << 1) ^ (value >> 63)) as u64);
    }
}

/// Reads the fields of a state's body, hashing them on the way; `left` counts the body's bytes not yet
/// read (the checksum after it excluded).
struct Reader<R: Read> {
    source: R,
    left: u64,
    hash: u64,
}

impl<R: Read> Reader<R> {
    fn left(&self) -> u64 {
        self.left
    }
    fn take(&mut self, count: usize) -> std::result::Result<Vec<u8>, String> {
        // Checked before allocating: a damaged length must not allocate gigabytes.
        if self.left < count as u64 {
            return Err("it ends too early".into());
        }
        let mut taken = vec![0; count];
        self.fill(&mut taken)?;
        Ok(taken)
    }
    /// Reads exactly `buffer.len()` bytes of the body (at most what is left) and hashes them.
    fn fill(&mut self, buffer: &mut [u8]) -> std::result::Result<(), String> {
        if self.left < buffer.len() as u64 {
            return Err("it ends too early".into());
        }
        self.source
            .read_exact(buffer)
            .map_err(|error| format!("it cannot be read to its end: {error}"))?;
        self.left -= buffer.len() as u64;
        self.hash = fnv1a_continue(self.hash, buffer);
        Ok(())
    }
    /// After the last field: the body must be used up and the checksum after it must match.
    fn check_sum(&mut self) -> std::result::Result<(), String> {
        if self.left != 0 {
            return Err("it holds bytes after its last field".into());
        }
        let mut checksum = [0u8; 8];
        self.source
            .read_exact(&mut checksum)
            .map_err(|_| "it ends before its checksum".to_string())?;
        if self.hash != u64::from_le_bytes(checksum) {
            return Err("its checksum does not match (the file is damaged or truncated)".into());
        }
        Ok(())
    }
    fn array<const N: usize>(&mut self) -> std::result::Result<[u8; N], String> {
        let mut taken = [0u8; N];
        self.fill(&mut taken)?;
        Ok(taken)
    }
    fn u8(&mut self) -> std::result::Result<u8, String> {
        Ok(self.array::<1>()?[0])
    }
    fn u32(&mut self) -> std::result::Result<u32, String> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> std::result::Result<u64, String> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn f64(&mut self) -> std::result::Result<f64, String> {
        Ok(f64::from_le_bytes(self.array()?))
    }
    fn str(&mut self) -> std::result::Result<String, String> {
        let length = self.u32()? as usize;
        String::from_utf8(self.take(length)?).map_err(|_| "a name is not UTF-8".to_string())
    }
    /// [`Writer::varint`]'s LEB128; more than 64 bits is damage.
    fn varint(&mut self) -> std::result::Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.u8()?;
            let bits = u64::from(byte & 0x7f);
            if shift == 63 && bits > 1 {
                break;
            }
            value |= bits << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("a number longer than 64 bits".into())
    }
    /// [`Writer::signed`]'s zigzag varint.
    fn signed(&mut self) -> std::result::Result<i64, String> {
        let zigzag = self.varint()?;
        Ok((zigzag >> 1) as i64 ^ -((zigzag & 1) as i64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::privacy::NoiseKey;

    fn state(dims: usize, elements: u64) -> OnlineState {
        let plan = OnlinePlan::new(1.0, dims).unwrap();
        let mut tree = OnlineTree::new(plan);
        let key = NoiseKey::from_user_seed(5);
        let codes: Vec<u32> = (0..elements).map(|i| (i as u32).wrapping_mul(2_654_435_761) >> 2).collect();
        tree.feed(&codes, &key).unwrap();
        OnlineState {
            parameters: StreamParameters {
                epsilon: 1.0,
                columns: (0..dims)
                    .map(|axis| StateColumn {
                        name: format!("x{axis}"),
                        data_type: "Float64".into(),
                        lo: 0.0,
                        hi: 1.0,
                    })
                    .collect(),
                seed: Some(5),
            },
            noise_key: key.to_bytes(),
            consistency_seed: 1,
            placement_seed: 2,
            consumed: vec![FileFingerprint { path: "/a.parquet".into(), bytes: 10, rows: elements, footer_hash: 3 }],
            tree,
        }
    }

    #[test]
    fn a_state_reads_back_identical_and_stays_compact() {
        for dims in [1, 2, 3] {
            let state = state(dims, 700);
            let bytes = state.encode();
            assert_eq!(OnlineState::decode(&bytes).unwrap(), state);
            // O(εt) cells of about 50 bytes (plus 4 bytes per element of history for d = 1).
            let cells: usize = state.tree.cells().iter().map(Vec::len).sum();
            assert!(bytes.len() <= 400 + cells * 40 + state.tree.history().len() * 4, "d={dims}: {}", bytes.len());
        }
    }

    #[test]
    fn damage_anywhere_is_detected() {
        let bytes = state(2, 300).encode();
        for at in (0..bytes.len()).step_by(37) {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x10;
            assert!(OnlineState::decode(&damaged).is_err(), "a flipped bit at {at} went unnoticed");
        }
        for length in [0, 10, bytes.len() / 2, bytes.len() - 1] {
            assert!(OnlineState::decode(&bytes[..length]).is_err());
        }
    }

    #[test]
    fn differences_name_each_changed_parameter() {
        let saved = state(2, 10).parameters;
        let mut given = saved.clone();
        assert!(saved.differences(&given).is_empty());
        given.epsilon = 2.0;
        given.columns[1].hi = 5.0;
        given.seed = None;
        let differences = saved.differences(&given).join("; ");
        for expected in ["--epsilon 2", "--bounds x1=0:5", "no --seed"] {
            assert!(differences.contains(expected), "{differences}");
        }
    }
}
