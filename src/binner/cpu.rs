//! The CPU binner: per-thread u32 histograms, Morton codes by BMI2 `pdep` where it is fast and by
//! byte lookup tables elsewhere, chosen at run time.

use crate::error::Result;
use crate::geometry::partition::{axis_byte_tables, deposit_bits, CellGeometry};

use super::histogram::SpillingHistogram;
use super::{Binner, BinnerWorker};

/// How axis indices are scattered into code bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DepositMethod {
    /// Four byte lookups per axis: portable and branch-free.
    LookupTable,
    /// One `pdep` per axis (x86-64 with BMI2, on CPUs where it is not micro-coded).
    #[cfg(target_arch = "x86_64")]
    Bmi2,
}

impl DepositMethod {
    /// The fastest method this CPU runs correctly.
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("bmi2") && !pdep_is_microcoded() {
            return DepositMethod::Bmi2;
        }
        DepositMethod::LookupTable
    }
}

/// AMD before Zen 3 (family < 0x19) implements pdep in microcode at 18–300 cycles.
#[cfg(target_arch = "x86_64")]
fn pdep_is_microcoded() -> bool {
    let vendor = std::arch::x86_64::__cpuid(0);
    let is_amd =
        vendor.ebx == 0x6874_7541 && vendor.edx == 0x6974_6e65 && vendor.ecx == 0x444d_4163; // "AuthenticAMD"
    if !is_amd {
        return false;
    }
    let signature = std::arch::x86_64::__cpuid(1).eax;
    let family = ((signature >> 8) & 0xf) + ((signature >> 20) & 0xff);
    family < 0x19
}

/// Bins on the CPU; one u32 histogram per scanning thread, summed into u64 at the end.
pub struct CpuBinner {
    geometry: CellGeometry,
    method: DepositMethod,
    tables: Vec<[[u32; 256]; 4]>,
}

impl CpuBinner {
    pub fn new(geometry: CellGeometry) -> Self {
        Self::with_method(geometry, DepositMethod::detect())
    }

    pub fn with_method(geometry: CellGeometry, method: DepositMethod) -> Self {
        CpuBinner {
            geometry,
            method,
            tables: axis_byte_tables(&geometry, deposit_bits),
        }
    }

    pub fn method(&self) -> DepositMethod {
        self.method
    }
}

pub struct CpuWorker {
    deposit: Deposit,
    histogram: SpillingHistogram,
    codes: Vec<u32>,
}

/// How one worker turns axis indices into leaf codes.
#[derive(Clone)]
struct Deposit {
    method: DepositMethod,
    tables: Vec<[[u32; 256]; 4]>,
    masks: Vec<u32>,
}

impl CpuBinner {
    fn deposit(&self) -> Deposit {
        Deposit {
            method: self.method,
            tables: self.tables.clone(),
            masks: (0..self.geometry.dims())
                .map(|axis| self.geometry.axis_mask(axis))
                .collect(),
        }
    }

    /// A worker that keeps every row's leaf code instead of counting it: for a share of rows far
    /// smaller than the leaves (a rank of a distributed run), whose histogram would be mostly zeros.
    pub fn code_worker(&self) -> CodeWorker {
        CodeWorker {
            deposit: self.deposit(),
            codes: Vec::new(),
        }
    }
}

/// The leaf codes of the rows a worker saw, in the order it saw them ([`CpuBinner::code_worker`]).
pub struct CodeWorker {
    deposit: Deposit,
    pub codes: Vec<u32>,
}

impl BinnerWorker for CodeWorker {
    fn add_batch(&mut self, axes: &[&[u32]]) -> Result<()> {
        let rows = axes.first().map_or(0, |axis| axis.len());
        let start = self.codes.len();
        self.codes.resize(start + rows, 0);
        for (axis, indices) in axes.iter().enumerate() {
            self.deposit.axis(axis, indices, &mut self.codes[start..]);
        }
        Ok(())
    }
}

impl Binner for CpuBinner {
    type Worker = CpuWorker;

    fn worker(&self) -> Result<CpuWorker> {
        Ok(CpuWorker {
            deposit: self.deposit(),
            histogram: SpillingHistogram::new(self.geometry.leaf_count()),
            codes: Vec::new(),
        })
    }

    fn finish(&self, workers: Vec<CpuWorker>) -> Result<Vec<u64>> {
        let histograms: Vec<SpillingHistogram> = workers.into_iter().map(|worker| worker.histogram).collect();
        Ok(SpillingHistogram::sum_all(&histograms, self.geometry.leaf_count()))
    }
}

impl CpuWorker {
    fn deposit_axis(&mut self, axis: usize, indices: &[u32]) {
        self.deposit.axis(axis, indices, &mut self.codes);
    }
}

impl Deposit {
    /// ORs axis `axis`'s bits of each row's code into `codes`.
    fn axis(&self, axis: usize, indices: &[u32], codes: &mut [u32]) {
        match self.method {
            DepositMethod::LookupTable => {
                let table = &self.tables[axis];
                for (code, &index) in codes.iter_mut().zip(indices) {
                    let bytes = index.to_le_bytes();
                    *code |= table[0][bytes[0] as usize]
                        | table[1][bytes[1] as usize]
                        | table[2][bytes[2] as usize]
                        | table[3][bytes[3] as usize];
                }
            }
            #[cfg(target_arch = "x86_64")]
            DepositMethod::Bmi2 => {
                // SAFETY: Bmi2 is only chosen after `is_x86_feature_detected!("bmi2")`.
                unsafe { deposit_axis_bmi2(codes, indices, self.masks[axis]) }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "bmi2")]
unsafe fn deposit_axis_bmi2(codes: &mut [u32], indices: &[u32], mask: u32) {
    for (code, &index) in codes.iter_mut().zip(indices) {
        *code |= std::arch::x86_64::_pdep_u32(index, mask);
    }
}

impl BinnerWorker for CpuWorker {
    fn add_batch(&mut self, axes: &[&[u32]]) -> Result<()> {
        let rows = axes.first().map_or(0, |axis| axis.len());
        self.codes.clear();
        self.codes.resize(rows, 0);
        for (axis, indices) in axes.iter().enumerate() {
            self.deposit_axis(axis, indices);
        }
        let bins = self.histogram.bins_for(rows);
        for &code in &self.codes {
            bins[code as usize] += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn methods() -> Vec<DepositMethod> {
        let mut methods = vec![DepositMethod::LookupTable];
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("bmi2") {
            methods.push(DepositMethod::Bmi2);
        }
        methods
    }

    #[test]
    fn every_deposit_method_matches_the_definition() {
        let mut state = 12345u64;
        for dims in 1..=5 {
            for depth in [0u32, 1, 9, 21, 30] {
                let geometry = CellGeometry::new(dims, depth);
                let rows = 777;
                let axes: Vec<Vec<u32>> = (0..dims)
                    .map(|axis| {
                        (0..rows)
                            .map(|_| {
                                state = state
                                    .wrapping_mul(6364136223846793005)
                                    .wrapping_add(1442695040888963407);
                                ((state >> 33) as u32)
                                    & ((1u64 << geometry.axis_bits(axis)) - 1) as u32
                            })
                            .collect()
                    })
                    .collect();
                let slices: Vec<&[u32]> = axes.iter().map(Vec::as_slice).collect();
                for method in methods() {
                    let binner = CpuBinner::with_method(geometry, method);
                    let mut worker = binner.worker().unwrap();
                    worker.codes.resize(rows, 0);
                    for (axis, indices) in slices.iter().enumerate() {
                        worker.deposit_axis(axis, indices);
                    }
                    for row in 0..rows {
                        let point: Vec<u32> = (0..dims).map(|axis| axes[axis][row]).collect();
                        assert_eq!(
                            worker.codes[row],
                            geometry.leaf_code(&point),
                            "{method:?} d={dims} r={depth}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn counts_survive_flushes_and_merge_across_workers() {
        let geometry = CellGeometry::new(2, 4);
        let binner = CpuBinner::new(geometry);
        let x: Vec<u32> = (0..1000).map(|i| i % 4).collect();
        let y: Vec<u32> = (0..1000).map(|i| (i / 4) % 4).collect();
        let mut first = binner.worker().unwrap();
        let mut second = binner.worker().unwrap();
        first.add_batch(&[&x, &y]).unwrap();
        first.histogram.rows_in_counts = u64::from(u32::MAX) - 10; // force a spill on the next batch
        first.add_batch(&[&x, &y]).unwrap();
        second.add_batch(&[&x[..500], &y[..500]]).unwrap();
        let counts = binner.finish(vec![first, second]).unwrap();
        assert_eq!(counts.iter().sum::<u64>(), 2500);
        let mut expected = vec![0u64; 16];
        for (rows, times) in [(1000usize, 2u64), (500, 1)] {
            for i in 0..rows {
                expected[geometry.leaf_code(&[x[i], y[i]]) as usize] += times;
            }
        }
        assert_eq!(counts, expected);
    }
}
