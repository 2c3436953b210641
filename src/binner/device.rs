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
            _ => Err(Error::bad_input(format!("--device gpu: {error}; use --device cpu"))),
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
            DeviceChoice::Gpu => Err(Error::bad_input(
                "--device gpu: this build has no GPU support (cargo feature `gpu`)",
            )),
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
                .map_err(|error| Error::bad_input(format!("--device gpu: {error}")))?
                .map(Device::Gpu)
                .ok_or_else(|| {
                    Error::bad_input(
                        "--device gpu: no GPU adapter found (for a software one, install Mesa's mesa-vulkan-drivers)",
                    )
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

#[cfg(feature = "gpu")]
pub struct SharedGpuWorker {
    binner: std::sync::Arc<std::sync::Mutex<Option<GpuLeafBinner>>>,
}

#[cfg(feature = "gpu")]
impl Binner for SharedGpuBinner {
    type Worker = SharedGpuWorker;

    fn worker(&self) -> Result<SharedGpuWorker> {
        Ok(SharedGpuWorker {
            binner: self.binner.clone(),
        })
    }

    fn finish(&self, workers: Vec<SharedGpuWorker>) -> Result<Vec<u64>> {
        drop(workers);
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
}
