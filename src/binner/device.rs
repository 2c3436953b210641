//! Choosing where device work runs (`--device auto|cpu|gpu`: binning, and PE's nearest-neighbour
//! counts) and putting the GPU binner behind the [`Binner`] interface that the parallel scan drives.

use crate::error::{Error, Result};
use crate::geometry::partition::CellGeometry;

use super::cpu::CpuBinner;
#[cfg(feature = "gpu")]
use super::gpu::{AdapterPolicy, GpuContext, GpuLeafBinner};
#[cfg(feature = "gpu")]
use super::{Binner, BinnerWorker};

/// Where binning runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum DeviceChoice {
    /// A real GPU when there is one, else the CPU (a software adapter is never chosen automatically).
    Auto,
    Cpu,
    /// A GPU adapter (a software one such as lavapipe included); fails when there is none.
    Gpu,
}

/// What a refused `--device gpu` tells the user to give instead.
const NO_GPU_WAY_OUT: &str = "give --device cpu or auto";

/// The binner a run will use, and the line the run report gives for it.
pub enum ChosenBinner {
    Cpu(CpuBinner, String),
    #[cfg(feature = "gpu")]
    Gpu(SharedGpuBinner, String),
}

impl ChosenBinner {
    /// `auto` takes a real GPU when one is there and works at this depth, else the CPU (a software
    /// adapter is never chosen automatically); `gpu` takes any adapter and fails clearly without one.
    pub fn for_run(choice: DeviceChoice, geometry: CellGeometry) -> Result<Self> {
        let cpu = |reason: &str| {
            let binner = CpuBinner::new(geometry);
            let line = format!("cpu ({:?} Morton codes{reason})", binner.method());
            ChosenBinner::Cpu(binner, line)
        };
        match Device::choose(choice)? {
            Device::Cpu(reason) => Ok(cpu(&reason)),
            #[cfg(feature = "gpu")]
            Device::Gpu(context) => match SharedGpuBinner::new(&context, geometry) {
                Ok(binner) => Ok(ChosenBinner::Gpu(
                    binner,
                    format!("gpu: {}", context.adapter_description()),
                )),
                Err(error) => Ok(cpu(&Device::unusable_gpu(choice, error)?)),
            },
        }
    }
}

/// Where a run's device work goes: an opened GPU, or the CPU with the reason the report gives for it
/// ("" when the CPU was asked for, else "; " and why).
pub enum Device {
    Cpu(String),
    #[cfg(feature = "gpu")]
    Gpu(GpuContext),
}

impl Device {
    /// When a caller cannot use the GPU it opened: under `auto` the CPU, with the reason for the report;
    /// under `gpu` an error that names the way out.
    #[cfg(feature = "gpu")]
    pub fn unusable_gpu(choice: DeviceChoice, error: impl std::fmt::Display) -> Result<String> {
        match choice {
            DeviceChoice::Auto => Ok(format!("; the GPU could not be used: {error}")),
            _ => Err(Error::bad_input(format!("--device gpu: {error}; {NO_GPU_WAY_OUT}"))),
        }
    }

    /// `auto` opens a real GPU when there is one, else takes the CPU; `gpu` opens any adapter (a
    /// software one included) and fails clearly without one. A caller that cannot use an opened GPU
    /// falls back to the CPU under `auto` and fails under `gpu`.
    pub fn choose(choice: DeviceChoice) -> Result<Self> {
        match choice {
            DeviceChoice::Cpu => Ok(Device::Cpu(String::new())),
            #[cfg(not(feature = "gpu"))]
            DeviceChoice::Auto => Ok(Device::Cpu("; built without the gpu feature".into())),
            #[cfg(not(feature = "gpu"))]
            DeviceChoice::Gpu => Err(Error::bad_input(format!(
                "--device gpu: this build has no GPU support (cargo feature `gpu`); {NO_GPU_WAY_OUT}"
            ))),
            #[cfg(feature = "gpu")]
            DeviceChoice::Auto if !may_have_gpu() => {
                Ok(Device::Cpu("; no GPU device on this machine".into()))
            }
            #[cfg(feature = "gpu")]
            DeviceChoice::Auto => match GpuContext::open(AdapterPolicy::RealGpuOnly) {
                Ok(Some(context)) => Ok(Device::Gpu(context)),
                Ok(None) => Ok(Device::Cpu("; no real GPU adapter".into())),
                Err(error) => Ok(Device::Cpu(format!("; the GPU could not be opened: {error}"))),
            },
            #[cfg(feature = "gpu")]
            DeviceChoice::Gpu => GpuContext::open(AdapterPolicy::AnyAdapter)
                .map_err(|error| Error::bad_input(format!("--device gpu: {error}; {NO_GPU_WAY_OUT}")))?
                .map(Device::Gpu)
                .ok_or_else(|| {
                    Error::bad_input(format!(
                        "--device gpu: no GPU adapter found (for a software one, install Mesa's \
                         mesa-vulkan-drivers); {NO_GPU_WAY_OUT}"
                    ))
                }),
        }
    }
}

/// Whether a real GPU could be present. On Linux every GPU driver exposes a device node; without one,
/// `auto` skips the Vulkan probe (which costs time and makes software drivers print warnings), since a
/// software adapter is never chosen automatically anyway.
#[cfg(feature = "gpu")]
fn may_have_gpu() -> bool {
    if !cfg!(target_os = "linux") {
        return true;
    }
    let has_render_node = std::fs::read_dir("/dev/dri")
        .map(|entries| {
            entries
                .flatten()
                .any(|entry| entry.file_name().to_string_lossy().starts_with("renderD"))
        })
        .unwrap_or(false);
    has_render_node
        || std::path::Path::new("/dev/nvidia0").exists()
        || std::path::Path::new("/dev/kfd").exists()
}

/// One GPU binner fed by every scanning thread in turn: decoding and quantising stay parallel on the
/// CPU, the device counts.
#[cfg(feature = "gpu")]
pub struct SharedGpuBinner {
    binner: std::sync::Arc<std::sync::Mutex<Option<GpuLeafBinner>>>,
}

#[cfg(feature = "gpu")]
impl SharedGpuBinner {
    pub fn new(context: &GpuContext, geometry: CellGeometry) -> Result<Self, super::gpu::GpuError> {
        let binner = GpuLeafBinner::new(context, geometry.dims(), geometry.depth())?;
        Ok(SharedGpuBinner {
            binner: std::sync::Arc::new(std::sync::Mutex::new(Some(binner))),
        })
    }
}

/// Rows a scanning thread gathers before it takes the GPU: uploading each 64 Ki-row batch on its own
/// spent the pass in submissions and waits under the lock (10^8 rows: 1 526 submissions).
#[cfg(feature = "gpu")]
const GPU_UPLOAD_ROWS: usize = 1 << 20;

#[cfg(feature = "gpu")]
pub struct SharedGpuWorker {
    binner: std::sync::Arc<std::sync::Mutex<Option<GpuLeafBinner>>>,
    /// This thread's quantised rows not yet uploaded, one vector per axis.
    pending: Vec<Vec<u32>>,
}

#[cfg(feature = "gpu")]
impl SharedGpuWorker {
    fn upload(&self, axes: &[&[u32]]) -> Result<()> {
        let mut guard = self
            .binner
            .lock()
            .map_err(|_| Error::internal("a GPU binning thread panicked"))?;
        let binner = guard
            .as_mut()
            .ok_or_else(|| Error::internal("the GPU binner was already finished"))?;
        binner
            .add_batch(axes)
            .map_err(|error| Error::internal(error.to_string()))
    }

    fn flush(&mut self) -> Result<()> {
        if self.pending.first().is_some_and(|axis| !axis.is_empty()) {
            let axes: Vec<&[u32]> = self.pending.iter().map(Vec::as_slice).collect();
            self.upload(&axes)?;
            self.pending.iter_mut().for_each(Vec::clear);
        }
        Ok(())
    }
}

#[cfg(feature = "gpu")]
impl Binner for SharedGpuBinner {
    type Worker = SharedGpuWorker;

    fn worker(&self) -> Result<SharedGpuWorker> {
        Ok(SharedGpuWorker {
            binner: self.binner.clone(),
            pending: Vec::new(),
        })
    }

    fn finish(&self, workers: Vec<SharedGpuWorker>) -> Result<Vec<u64>> {
        for mut worker in workers {
            worker.flush()?;
        }
        let binner = self
            .binner
            .lock()
            .map_err(|_| Error::internal("a GPU binning thread panicked"))?
            .take()
            .ok_or_else(|| Error::internal("the GPU binner was finished twice"))?;
        binner
            .finish()
            .map_err(|error| Error::internal(error.to_string()))
    }
}

#[cfg(feature = "gpu")]
impl BinnerWorker for SharedGpuWorker {
    fn add_batch(&mut self, axes: &[&[u32]]) -> Result<()> {
        if axes.first().is_some_and(|axis| axis.len() >= GPU_UPLOAD_ROWS) {
            return self.upload(axes);
        }
        self.pending.resize_with(axes.len(), Vec::new);
        for (pending, axis) in self.pending.iter_mut().zip(axes) {
            pending.extend_from_slice(axis);
        }
        if self.pending[0].len() >= GPU_UPLOAD_ROWS {
            self.flush()?;
        }
        Ok(())
    }
}

#[cfg(all(test, feature = "gpu"))]
mod tests {
    use super::*;
    use crate::binner::cpu::DepositMethod;

    /// Rows reach the GPU in each way a worker sends them: gathered until past the upload size,
    /// a batch of at least that size straight away, and what is left over at the end.
    #[test]
    fn gathered_and_direct_uploads_count_every_row() {
        let Some(context) = super::super::gpu::tests::test_context("gathered_and_direct_uploads_count_every_row") else {
            return;
        };
        let geometry = CellGeometry::new(2, 10);
        let rows = 2 * GPU_UPLOAD_ROWS + 300_000;
        let axes: Vec<Vec<u32>> = (0..2u64)
            .map(|axis| {
                (0..rows as u64)
                    .map(|row| ((row * 2 + axis).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 59) as u32)
                    .collect()
            })
            .collect();
        let slice = |range: std::ops::Range<usize>| [&axes[0][range.clone()], &axes[1][range]];
        let cpu = CpuBinner::with_method(geometry, DepositMethod::LookupTable);
        let mut reference = cpu.worker().unwrap();
        reference.add_batch(&slice(0..rows)).unwrap();
        let reference = cpu.finish(vec![reference]).unwrap();

        let gpu = SharedGpuBinner::new(context, geometry).unwrap();
        let (mut gathering, mut direct) = (gpu.worker().unwrap(), gpu.worker().unwrap());
        let gathered = GPU_UPLOAD_ROWS + 3 * 65_536;
        for start in (0..gathered).step_by(65_536) {
            gathering.add_batch(&slice(start..gathered.min(start + 65_536))).unwrap();
        }
        direct.add_batch(&slice(gathered..gathered + GPU_UPLOAD_ROWS)).unwrap();
        direct.add_batch(&slice(gathered + GPU_UPLOAD_ROWS..rows)).unwrap();
        assert_eq!(gpu.finish(vec![gathering, direct]).unwrap(), reference);
    }
}
