//! The wgpu binner: host-quantised per-axis cell indices in, the leaf histogram of the dyadic partition
//! out (docs/design.md).
//!
//! The host computes every index q_k in f64 from public bounds; the GPU only interleaves their bits into
//! the Morton leaf code and counts, so the histogram is bit-identical to the CPU binner's by construction.
//!
//! Design (`shaders/morton_histogram.wgsl` holds the kernels):
//! - Input is streamed in chunks of at most [`DEFAULT_CHUNK_ROWS`] rows (fewer where the adapter's
//!   `max_storage_buffer_binding_size` or `max_buffer_size` demand it), axis-major, one upload per axis,
//!   one submission per chunk, at most two chunks in flight.
//! - Each dispatch is a fixed grid of at most [`MAX_WORKGROUPS`] workgroups ([`SOFTWARE_MAX_WORKGROUPS`]
//!   on lavapipe) with a grid-stride loop, so a chunk of any length stays under the
//!   65 535-workgroups-per-dimension limit.
//! - Counts live in u32 atomics. Depth ≤ [`PRIVATE_MAX_DEPTH`]: each workgroup counts into workgroup
//!   memory and flushes its non-zero bins to the global counts (fewer global atomics); deeper: global
//!   atomics directly.
//! - Overflow: before a chunk would bring the rows counted since the last carry above u32::MAX, a carry
//!   kernel folds the u32 counts into u64 totals (lo/hi u32 words, allocated on first use) and clears
//!   them. No bin can see 2^32 increments between carries. Runs under 2^32 rows never carry and read the
//!   u32 counts back once, in `finish`.

use std::fmt;
use std::sync::{mpsc, Arc, Mutex};

use bytemuck::{Pod, Zeroable};
use rayon::prelude::*;

/// Deepest leaf level: leaf codes are u32 and the shader's bit arithmetic assumes r ≤ 30.
pub const GPU_MAX_DEPTH: u32 = 30;
/// Deepest leaf level counted in workgroup memory: 2^12 u32 counters fill the 16 KiB WebGPU default.
pub const PRIVATE_MAX_DEPTH: u32 = 12;
/// Invocations per workgroup; must equal `WORKGROUP_SIZE` in the shader.
pub const WORKGROUP_SIZE: u32 = 256;
/// Upper bound on workgroups per dispatch on a real GPU; the grid-stride loop covers the rest of a chunk.
pub const MAX_WORKGROUPS: u32 = 1024;
/// The same bound on a software adapter: lavapipe pays per workgroup; on 2 busy cores a grid of 32 ran
/// 1.05–1.4× faster than one of 256 (interleaved runs, 10^7 rows, d = 2, r = 12–24).
pub const SOFTWARE_MAX_WORKGROUPS: u32 = 32;
/// Rows a workgroup should handle before another workgroup is worth launching (amortises the flush of
/// up to 4096 private bins).
pub const ROWS_PER_WORKGROUP: u32 = 16_384;
/// Rows per upload when the adapter's limits allow: 16 MiB per axis, enough to keep a GPU busy
/// without holding much staging memory.
pub const DEFAULT_CHUNK_ROWS: usize = 1 << 22;

/// Bytes of workgroup memory the privatised kernel declares (`PRIVATE_BINS` u32 counters).
const PRIVATE_BYTES: u32 = 4 << PRIVATE_MAX_DEPTH;
/// Rows of one chunk are indexed with u32 in the shader; keep well clear of wrap-around.
const MAX_CHUNK_ROWS: usize = 1 << 31;
/// Slots for base_k in the uniform block (`array<vec4<u32>, 8>`); at most r axes carry bits.
const BASE_SLOTS: usize = 32;
const _: () = assert!(GPU_MAX_DEPTH as usize <= BASE_SLOTS);
const SHADER_SOURCE: &str = include_str!("../../shaders/morton_histogram.wgsl");

/// Which adapters `auto` may pick: a real GPU only; `gpu` also accepts a software adapter (lavapipe/llvmpipe).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdapterPolicy {
    RealGpuOnly,
    AnyAdapter,
}

#[derive(Debug)]
pub enum GpuError {
    /// The adapter was found but refused to create a device.
    RequestDevice { adapter: String, reason: String },
    /// The adapter's limits cannot hold what the binner needs.
    Unsupported { adapter: String, reason: String },
    /// The caller broke the binner's input contract.
    InvalidInput(String),
    /// The device reported an error (validation, out of memory, lost device, failed map).
    Device {
        adapter: String,
        operation: &'static str,
        reason: String,
    },
}

impl fmt::Display for GpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuError::RequestDevice { adapter, reason } => {
                write!(
                    f,
                    "GPU adapter {adapter} refused to create a device: {reason}"
                )
            }
            GpuError::Unsupported { adapter, reason } => {
                write!(f, "GPU adapter {adapter} cannot run the binner: {reason}")
            }
            GpuError::InvalidInput(reason) => write!(f, "GPU binner input: {reason}"),
            GpuError::Device {
                adapter,
                operation,
                reason,
            } => {
                write!(
                    f,
                    "GPU adapter {adapter} failed while {operation}: {reason}"
                )
            }
        }
    }
}

impl std::error::Error for GpuError {}

/// An opened device: wgpu device and queue, and what the run report says about the adapter. Cloning is
/// cheap and shares the device.
#[derive(Clone)]
pub struct GpuContext {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    /// First error the device reported outside a call's own checks; taken by the next check.
    device_error: Arc<Mutex<Option<String>>>,
}

impl GpuContext {
    /// Ok(None) when no adapter satisfies the policy (not an error: the caller decides).
    ///
    /// Looks at Vulkan and Metal adapters (`WGPU_BACKEND` overrides) and takes the best by device type:
    /// discrete, integrated, virtual, then (under `AnyAdapter`) software. The device gets the adapter's
    /// own limits, so large chunks and the 16 KiB private histogram fit wherever the hardware allows.
    pub fn open(policy: AdapterPolicy) -> Result<Option<Self>, GpuError> {
        let mut descriptor = wgpu::InstanceDescriptor::new_without_display_handle();
        descriptor.backends = wgpu::Backends::VULKAN | wgpu::Backends::METAL;
        let descriptor = descriptor.with_env();
        let backends = descriptor.backends;
        let instance = wgpu::Instance::new(descriptor);
        let adapters = pollster::block_on(instance.enumerate_adapters(backends));
        let Some(adapter) = adapters
            .into_iter()
            .filter(|adapter| adapter_rank(adapter.get_info().device_type, policy).is_some())
            .max_by_key(|adapter| adapter_rank(adapter.get_info().device_type, policy))
        else {
            return Ok(None);
        };
        let info = adapter.get_info();
        let device_descriptor = wgpu::DeviceDescriptor {
            label: Some("dpsynth binner"),
            required_limits: adapter.limits(),
            ..Default::default()
        };
        let (device, queue) = pollster::block_on(adapter.request_device(&device_descriptor))
            .map_err(|error| GpuError::RequestDevice {
                adapter: describe(&info),
                reason: error.to_string(),
            })?;
        let device_error = Arc::new(Mutex::new(None));
        let sink = Arc::clone(&device_error);
        device.on_uncaptured_error(Arc::new(move |error: wgpu::Error| {
            record_first(&sink, error.to_string())
        }));
        let sink = Arc::clone(&device_error);
        device.set_device_lost_callback(move |reason, message| {
            record_first(&sink, format!("device lost ({reason:?}): {message}"))
        });
        Ok(Some(GpuContext {
            device,
            queue,
            info,
            device_error,
        }))
    }

    /// Name, backend, device type and driver, for the run report.
    pub fn adapter_description(&self) -> String {
        describe(&self.info)
    }

    /// True for a CPU (software) adapter such as lavapipe/llvmpipe.
    pub fn is_software(&self) -> bool {
        self.info.device_type == wgpu::DeviceType::Cpu
    }

    pub(crate) fn limits(&self) -> wgpu::Limits {
        self.device.limits()
    }

    /// Turns an error the device reported since the last check into a `GpuError`.
    pub(crate) fn check(&self, operation: &'static str) -> Result<(), GpuError> {
        let recorded = self
            .device_error
            .lock()
            .map(|mut slot| slot.take())
            .unwrap_or_else(|poisoned| Some(format!("error recorder poisoned: {poisoned}")));
        match recorded {
            Some(reason) => Err(self.device_failure(operation, reason)),
            None => Ok(()),
        }
    }

    pub(crate) fn device_failure(&self, operation: &'static str, reason: impl fmt::Display) -> GpuError {
        GpuError::Device {
            adapter: self.adapter_description(),
            operation,
            reason: reason.to_string(),
        }
    }

    pub(crate) fn unsupported(&self, reason: String) -> GpuError {
        GpuError::Unsupported {
            adapter: self.adapter_description(),
            reason,
        }
    }

    fn wait_for(
        &self,
        submission: wgpu::SubmissionIndex,
        operation: &'static str,
    ) -> Result<(), GpuError> {
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(submission),
                timeout: None,
            })
            .map_err(|error| self.device_failure(operation, error))?;
        self.check(operation)
    }
}

/// Preference among adapters under a policy; None = not allowed.
fn adapter_rank(device_type: wgpu::DeviceType, policy: AdapterPolicy) -> Option<u8> {
    match (device_type, policy) {
        (wgpu::DeviceType::DiscreteGpu, _) => Some(4),
        (wgpu::DeviceType::IntegratedGpu, _) => Some(3),
        (wgpu::DeviceType::VirtualGpu, _) => Some(2),
        (wgpu::DeviceType::Other, AdapterPolicy::AnyAdapter) => Some(1),
        (wgpu::DeviceType::Cpu, AdapterPolicy::AnyAdapter) => Some(0),
        (wgpu::DeviceType::Other | wgpu::DeviceType::Cpu, AdapterPolicy::RealGpuOnly) => None,
    }
}

fn describe(info: &wgpu::AdapterInfo) -> String {
    format!(
        "{} ({:?}, {:?}, driver {} {})",
        info.name, info.backend, info.device_type, info.driver, info.driver_info
    )
}

fn record_first(slot: &Mutex<Option<String>>, message: String) {
    if let Ok(mut slot) = slot.lock() {
        slot.get_or_insert(message);
    }
}

/// Uniform block of the shader (`BinParams`).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct BinParams {
    rows: u32,
    active_axes: u32,
    stride: u32,
    bins: u32,
    base: [u32; BASE_SLOTS],
}

/// Where each axis's bits go in the leaf code.
struct AxisLayout {
    dims: usize,
    depth: u32,
    /// h_k: bits of axis k's index.
    axis_bits: Vec<u32>,
    /// Axes with h_k > 0: the first min(d, r) axes, the only ones uploaded.
    active_axes: usize,
    /// base_k = r − 1 − k − d·(h_k − 1): bit of θ that receives bit 0 of q_k (active axes only).
    base: [u32; BASE_SLOTS],
}

impl AxisLayout {
    fn new(dims: usize, depth: u32) -> Self {
        let r = depth as usize;
        let axis_bits: Vec<u32> = (0..dims)
            .map(|k| ((r + dims - 1 - k) / dims) as u32)
            .collect();
        let active_axes = dims.min(r);
        let mut base = [0u32; BASE_SLOTS];
        for (k, slot) in base.iter_mut().enumerate().take(active_axes) {
            *slot = (r - 1 - k - dims * (axis_bits[k] as usize - 1)) as u32;
        }
        AxisLayout {
            dims,
            depth,
            axis_bits,
            active_axes,
            base,
        }
    }

    fn params(&self, rows: u32) -> BinParams {
        BinParams {
            rows,
            active_axes: self.active_axes as u32,
            // Only the stride between bits of one axis matters; d > 30 never spreads a second bit.
            stride: self.dims.min(u32::MAX as usize) as u32,
            bins: 1 << self.depth,
            base: self.base,
        }
    }
}

/// The lo/hi u32 words of the u64 totals, allocated at the first carry.
struct Totals {
    lo: wgpu::Buffer,
    hi: wgpu::Buffer,
    carry_bind_group: wgpu::BindGroup,
}

/// Accumulates the leaf histogram of batches of quantised rows on one device. It shares the context's
/// device (no borrow), so it can live in a long-lived binner; it is `Send`, and `add_batch` takes
/// `&mut self`. After an error other than `InvalidInput` its counts are unspecified: drop it.
pub struct GpuLeafBinner {
    ctx: GpuContext,
    layout: AxisLayout,
    /// Counts in workgroup memory (bin_private) rather than global atomics (bin_global).
    #[cfg(test)]
    private: bool,
    chunk_rows: usize,
    workgroup_limit: u32,
    params_buffer: wgpu::Buffer,
    axes_buffer: wgpu::Buffer,
    counts_buffer: wgpu::Buffer,
    bin_pipeline: wgpu::ComputePipeline,
    bin_bind_group: wgpu::BindGroup,
    carry_pipeline: wgpu::ComputePipeline,
    totals: Option<Totals>,
    /// Rows added to the u32 counts since the last carry.
    rows_since_carry: u64,
    /// Carry before the u32 counts could see more rows than this (u32::MAX; smaller in tests).
    carry_threshold: u64,
    in_flight: Option<wgpu::SubmissionIndex>,
}

impl GpuLeafBinner {
    pub fn new(ctx: &GpuContext, dims: usize, depth: u32) -> Result<Self, GpuError> {
        Self::with_chunk_rows(ctx, dims, depth, DEFAULT_CHUNK_ROWS)
    }

    /// As [`new`](Self::new), uploading at most `max_chunk_rows` rows at a time (still capped by the
    /// adapter's limits).
    pub fn with_chunk_rows(
        ctx: &GpuContext,
        dims: usize,
        depth: u32,
        max_chunk_rows: usize,
    ) -> Result<Self, GpuError> {
        if dims == 0 {
            return Err(GpuError::InvalidInput(
                "a partition needs at least one axis".into(),
            ));
        }
        if depth > GPU_MAX_DEPTH {
            return Err(GpuError::InvalidInput(format!(
                "depth {depth} exceeds the maximum {GPU_MAX_DEPTH}"
            )));
        }
        if max_chunk_rows == 0 {
            return Err(GpuError::InvalidInput(
                "chunks need at least one row".into(),
            ));
        }
        let limits = ctx.limits();
        if limits.max_compute_invocations_per_workgroup < WORKGROUP_SIZE
            || limits.max_compute_workgroup_size_x < WORKGROUP_SIZE
        {
            return Err(ctx.unsupported(format!(
                "workgroups of {WORKGROUP_SIZE} invocations exceed max_compute_invocations_per_workgroup \
                 {} / max_compute_workgroup_size_x {}",
                limits.max_compute_invocations_per_workgroup, limits.max_compute_workgroup_size_x
            )));
        }
        let max_binding = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);
        let counts_bytes = 4u64 << depth;
        if counts_bytes > max_binding {
            return Err(ctx.unsupported(format!(
                "depth {depth} needs {counts_bytes} bytes of counters, over the limit of {max_binding} bytes \
                 (min of max_storage_buffer_binding_size {} and max_buffer_size {})",
                limits.max_storage_buffer_binding_size, limits.max_buffer_size
            )));
        }
        let layout = AxisLayout::new(dims, depth);
        let row_bytes = 4 * layout.active_axes as u64;
        let rows_by_limit = max_binding.checked_div(row_bytes).unwrap_or(u64::MAX);
        let chunk_rows = (max_chunk_rows as u64)
            .min(MAX_CHUNK_ROWS as u64)
            .min(rows_by_limit) as usize;
        if chunk_rows == 0 {
            return Err(ctx.unsupported(format!(
                "one row of {} axes ({row_bytes} bytes) exceeds the binding limit of {max_binding} bytes",
                layout.active_axes
            )));
        }
        let workgroup_limit = if ctx.is_software() {
            SOFTWARE_MAX_WORKGROUPS
        } else {
            MAX_WORKGROUPS
        };
        let private = depth <= PRIVATE_MAX_DEPTH
            && limits.max_compute_workgroup_storage_size >= PRIVATE_BYTES;

        let device = &ctx.device;
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("morton_histogram"),
            source: wgpu::ShaderSource::Wgsl(SHADER_SOURCE.into()),
        });
        let pipeline = |entry_point: &str| {
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry_point),
                layout: None,
                module: &module,
                entry_point: Some(entry_point),
                compilation_options: wgpu::PipelineCompilationOptions {
                    // bin_private zeroes the bins it uses itself.
                    zero_initialize_workgroup_memory: false,
                    ..Default::default()
                },
                cache: None,
            })
        };
        let bin_pipeline = pipeline(if private { "bin_private" } else { "bin_global" });
        let carry_pipeline = pipeline("carry_into_totals");

        let params_buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("bin params"),
            size: std::mem::size_of::<BinParams>() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        // A binding cannot be empty: depth 0 uploads no axes but still binds one word.
        let axes_buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("axis indices"),
            size: (row_bytes * chunk_rows as u64).max(4),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let counts_buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("u32 leaf counts"),
            size: counts_bytes,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let bin_bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("bin"),
            layout: &bin_pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: params_buffer.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: axes_buffer.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: counts_buffer.as_entire_binding(),
                },
            ],
        });
        ctx.queue
            .write_buffer(&params_buffer, 0, bytemuck::bytes_of(&layout.params(0)));
        ctx.check("creating the binner's buffers and pipelines")?;
        Ok(GpuLeafBinner {
            ctx: ctx.clone(),
            layout,
            #[cfg(test)]
            private,
            chunk_rows,
            workgroup_limit: workgroup_limit
                .min(limits.max_compute_workgroups_per_dimension)
                .max(1),
            params_buffer,
            axes_buffer,
            counts_buffer,
            bin_pipeline,
            bin_bind_group,
            carry_pipeline,
            totals: None,
            rows_since_carry: 0,
            carry_threshold: u32::MAX as u64,
            in_flight: None,
        })
    }

    /// True when rows are counted in workgroup memory (depth ≤ [`PRIVATE_MAX_DEPTH`] and the adapter
    /// gives 16 KiB of workgroup storage).
    #[cfg(test)]
    pub fn uses_workgroup_histogram(&self) -> bool {
        self.private
    }

    /// Rows uploaded per chunk.
    #[cfg(test)]
    pub fn chunk_rows(&self) -> usize {
        self.chunk_rows
    }

    /// axes.len() == dims, all slices the same length, q_k < 2^{h_k}. A broken contract is an
    /// `InvalidInput` error (checked with an OR-reduction per axis, cheap next to the upload), never a
    /// wrong count.
    pub fn add_batch(&mut self, axes: &[&[u32]]) -> Result<(), GpuError> {
        let rows = self.validate(axes)?;
        let active = &axes[..self.layout.active_axes];
        let mut start = 0;
        while start < rows {
            let len = self.chunk_rows.min(rows - start);
            if self.rows_since_carry + len as u64 > self.carry_threshold {
                self.carry()?;
            }
            self.bin_chunk(active, start, len)?;
            self.rows_since_carry += len as u64;
            start += len;
        }
        Ok(())
    }

    /// The leaf histogram, length 2^depth, read back once (twice, lo and hi words, after > 2^32 − 1 rows)
    /// and widened to u64 on the run's threads straight from the mapped copy: at depth 26 a one-thread
    /// copy and widening of the 256 MiB took twice as long as the CPU binner's whole merge.
    pub fn finish(mut self) -> Result<Vec<u64>, GpuError> {
        let ctx = self.ctx.clone();
        if self.totals.is_none() {
            return with_mapped_words(&ctx, &self.counts_buffer, |counts| joined_words(counts, None));
        }
        let totals = self.carry()?;
        let hi = read_words(&ctx, &totals.hi)?;
        with_mapped_words(&ctx, &totals.lo, |lo| joined_words(lo, Some(&hi)))
    }

    /// Row count of a batch that keeps the contract.
    fn validate(&self, axes: &[&[u32]]) -> Result<usize, GpuError> {
        if axes.len() != self.layout.dims {
            return Err(GpuError::InvalidInput(format!(
                "got {} axes, the binner was built for {}",
                axes.len(),
                self.layout.dims
            )));
        }
        let rows = axes[0].len();
        for (k, (axis, &bits)) in axes.iter().zip(&self.layout.axis_bits).enumerate() {
            if axis.len() != rows {
                return Err(GpuError::InvalidInput(format!(
                    "axis {k} has {} rows, axis 0 has {rows}",
                    axis.len()
                )));
            }
            let all_bits = axis.iter().fold(0u32, |acc, &q| acc | q);
            if u64::from(all_bits) >> bits != 0 {
                return Err(GpuError::InvalidInput(format!(
                    "axis {k} has a cell index ≥ 2^{bits} (the axis is halved {bits} times at depth {})",
                    self.layout.depth
                )));
            }
        }
        Ok(rows)
    }

    /// Uploads rows start..start+len of the active axes and counts them.
    fn bin_chunk(&mut self, active: &[&[u32]], start: usize, len: usize) -> Result<(), GpuError> {
        let queue = &self.ctx.queue;
        let rows = len as u32; // len ≤ chunk_rows ≤ 2^31
        queue.write_buffer(
            &self.params_buffer,
            0,
            bytemuck::bytes_of(&self.layout.params(rows)),
        );
        for (k, axis) in active.iter().enumerate() {
            let offset = (k * len * 4) as u64;
            queue.write_buffer(
                &self.axes_buffer,
                offset,
                bytemuck::cast_slice(&axis[start..start + len]),
            );
        }
        let workgroups = rows
            .div_ceil(ROWS_PER_WORKGROUP)
            .clamp(1, self.workgroup_limit);
        dispatch(
            &self.ctx,
            &mut self.in_flight,
            &self.bin_pipeline,
            &self.bin_bind_group,
            workgroups,
            "binning a chunk",
        )
    }

    /// Folds the u32 counts into the u64 totals (allocating them on first use) and clears them.
    fn carry(&mut self) -> Result<&Totals, GpuError> {
        let totals = match self.totals.take() {
            Some(totals) => totals,
            None => self.allocate_totals()?,
        };
        let bins = 1u32 << self.layout.depth;
        let workgroups = bins.div_ceil(WORKGROUP_SIZE).clamp(1, self.workgroup_limit);
        dispatch(
            &self.ctx,
            &mut self.in_flight,
            &self.carry_pipeline,
            &totals.carry_bind_group,
            workgroups,
            "carrying counts into u64 totals",
        )?;
        self.rows_since_carry = 0;
        Ok(self.totals.insert(totals))
    }

    fn allocate_totals(&self) -> Result<Totals, GpuError> {
        let device = &self.ctx.device;
        let words = |label| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: 4u64 << self.layout.depth,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        };
        let lo = words("u64 totals, low words");
        let hi = words("u64 totals, high words");
        let carry_bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("carry"),
            layout: &self.carry_pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: self.params_buffer.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: self.counts_buffer.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 3,
                    resource: lo.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 4,
                    resource: hi.as_entire_binding(),
                },
            ],
        });
        self.ctx.check("allocating u64 totals")?;
        Ok(Totals {
            lo,
            hi,
            carry_bind_group,
        })
    }
}

/// Submits one dispatch and waits for the one before it, so at most two are in flight (bounds the
/// staging memory of queued uploads).
fn dispatch(
    ctx: &GpuContext,
    in_flight: &mut Option<wgpu::SubmissionIndex>,
    pipeline: &wgpu::ComputePipeline,
    bind_group: &wgpu::BindGroup,
    workgroups: u32,
    operation: &'static str,
) -> Result<(), GpuError> {
    let mut encoder = ctx
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
    {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: None,
            timestamp_writes: None,
        });
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, bind_group, &[]);
        pass.dispatch_workgroups(workgroups, 1, 1);
    }
    let submission = ctx.queue.submit([encoder.finish()]);
    if let Some(previous) = in_flight.replace(submission) {
        ctx.wait_for(previous, operation)?;
    }
    ctx.check(operation)
}

/// Copies a u32 buffer to the host.
pub(crate) fn read_words(ctx: &GpuContext, source: &wgpu::Buffer) -> Result<Vec<u32>, GpuError> {
    with_mapped_words(ctx, source, <[u32]>::to_vec)
}

/// Copies a u32 buffer into host-visible memory and hands the mapped words to `read`.
fn with_mapped_words<T>(
    ctx: &GpuContext,
    source: &wgpu::Buffer,
    read: impl FnOnce(&[u32]) -> T,
) -> Result<T, GpuError> {
    let staging = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("readback"),
        size: source.size(),
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = ctx
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
    encoder.copy_buffer_to_buffer(source, 0, &staging, 0, source.size());
    ctx.queue.submit([encoder.finish()]);
    let (sender, receiver) = mpsc::channel();
    staging
        .slice(..)
        .map_async(wgpu::MapMode::Read, move |result| {
            // The receiver outlives the poll below; a failed send only means we already gave up.
            let _ = sender.send(result);
        });
    ctx.device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|error| ctx.device_failure("reading the histogram back", error))?;
    ctx.check("reading the histogram back")?;
    receiver
        .recv()
        .map_err(|error| ctx.device_failure("reading the histogram back", error))?
        .map_err(|error| ctx.device_failure("mapping the histogram", error))?;
    let result = {
        let view = staging
            .slice(..)
            .get_mapped_range()
            .map_err(|error| ctx.device_failure("mapping the histogram", error))?;
        read(bytemuck::cast_slice::<u8, u32>(&view))
    };
    staging.unmap();
    Ok(result)
}

/// Words per task when widening a read-back histogram.
const WIDEN_CHUNK_WORDS: usize = 1 << 16;

/// The u64 counts whose low words are `lo` and high words `hi` (zero without), in parallel.
fn joined_words(lo: &[u32], hi: Option<&[u32]>) -> Vec<u64> {
    let mut words = vec![0u64; lo.len()];
    words
        .par_chunks_mut(WIDEN_CHUNK_WORDS)
        .zip(lo.par_chunks(WIDEN_CHUNK_WORDS))
        .enumerate()
        .for_each(|(chunk, (words, lo))| match hi {
            None => words.iter_mut().zip(lo).for_each(|(word, &lo)| *word = u64::from(lo)),
            Some(hi) => {
                let hi = &hi[chunk * WIDEN_CHUNK_WORDS..][..lo.len()];
                for ((word, &lo), &hi) in words.iter_mut().zip(lo).zip(hi) {
                    *word = (u64::from(hi) << 32) | u64::from(lo);
                }
            }
        });
    words
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::OnceLock;

    /// The device the tests share, or None after a loud line saying the GPU was not tested.
    pub(in crate::binner) fn test_context(test: &str) -> Option<&'static GpuContext> {
        static CONTEXT: OnceLock<Option<GpuContext>> = OnceLock::new();
        let context = CONTEXT.get_or_init(|| match GpuContext::open(AdapterPolicy::AnyAdapter) {
            Ok(context) => context,
            Err(error) => panic!("an adapter exists but cannot be used: {error}"),
        });
        if context.is_none() {
            // CI installs lavapipe and sets this, so a missing adapter there is a failure, not a skip.
            assert!(
                std::env::var_os("DPSYNTH_REQUIRE_GPU").is_none(),
                "DPSYNTH_REQUIRE_GPU is set but no wgpu adapter exists"
            );
            // Straight to the stderr handle: libtest captures eprintln! of passing tests.
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: no wgpu adapter; {test} did not test the GPU binner"
            );
        }
        context.as_ref()
    }

    /// The leaf code straight from the contract: level j takes bit h_k − 1 − t of q_k (k = j mod d,
    /// t = ⌊j/d⌋) and puts it at bit r − 1 − j.
    fn reference_code(q: &[u32], depth: u32) -> u32 {
        let d = q.len() as u32;
        let mut code = 0u32;
        for j in 0..depth {
            let (k, t) = (j % d, j / d);
            let h = (depth + d - 1 - k) / d;
            let bit = (q[k as usize] >> (h - 1 - t)) & 1;
            code |= bit << (depth - 1 - j);
        }
        code
    }

    fn reference_histogram(axes: &[Vec<u32>], depth: u32) -> Vec<u64> {
        let mut counts = vec![0u64; 1 << depth];
        let mut row = vec![0u32; axes.len()];
        for i in 0..axes[0].len() {
            for (slot, axis) in row.iter_mut().zip(axes) {
                *slot = axis[i];
            }
            counts[reference_code(&row, depth) as usize] += 1;
        }
        counts
    }

    /// splitmix64: a fixed-seed test stream, independent of the code under test.
    struct TestRng(u64);

    impl TestRng {
        fn next_u64(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
    }

    fn axis_bits(dims: usize, depth: u32, axis: usize) -> u32 {
        ((depth as usize + dims - 1 - axis) / dims) as u32
    }

    /// `random` uniform rows, then `extremes` all-zero rows and `extremes` all-max rows, axis-major.
    fn test_rows(
        rng: &mut TestRng,
        dims: usize,
        depth: u32,
        random: usize,
        extremes: usize,
    ) -> Vec<Vec<u32>> {
        (0..dims)
            .map(|k| {
                let bits = axis_bits(dims, depth, k);
                let max = ((1u64 << bits) - 1) as u32;
                let mut axis: Vec<u32> = (0..random)
                    .map(|_| (rng.next_u64() >> (64 - bits.max(1))) as u32 & max)
                    .collect();
                axis.extend(std::iter::repeat_n(0, extremes));
                axis.extend(std::iter::repeat_n(max, extremes));
                axis
            })
            .collect()
    }

    /// Feeds rows in batches cut at `cuts` (ragged, empty batches allowed) and returns the histogram.
    fn bin_in_batches(mut binner: GpuLeafBinner, axes: &[Vec<u32>], cuts: &[usize]) -> Vec<u64> {
        let rows = axes[0].len();
        let mut bounds: Vec<usize> = cuts.iter().map(|&cut| cut.min(rows)).collect();
        bounds.insert(0, 0);
        bounds.push(rows);
        for pair in bounds.windows(2) {
            let batch: Vec<&[u32]> = axes.iter().map(|axis| &axis[pair[0]..pair[1]]).collect();
            binner.add_batch(&batch).expect("batch");
        }
        binner.finish().expect("finish")
    }

    #[test]
    fn reference_code_follows_the_contract_on_known_codes() {
        // d = 2, r = 5: levels split x, y, x, y, x; x has 3 bits, y has 2.
        assert_eq!(reference_code(&[0b100, 0b00], 5), 0b10000);
        assert_eq!(reference_code(&[0b000, 0b10], 5), 0b01000);
        assert_eq!(reference_code(&[0b001, 0b01], 5), 0b00011);
        assert_eq!(reference_code(&[0b111, 0b11], 5), 0b11111);
        // d = 3, r = 2: the third axis carries no bits.
        assert_eq!(reference_code(&[1, 1, 0], 2), 0b11);
    }

    #[test]
    fn matches_reference_for_every_dims_and_depth() {
        let Some(ctx) = test_context("matches_reference_for_every_dims_and_depth") else {
            return;
        };
        let mut rng = TestRng(7);
        for dims in [1, 2, 3, 5] {
            for depth in [0, 1, 7, 12, 13, 20] {
                let axes = test_rows(&mut rng, dims, depth, 3_000, 40);
                let binner = GpuLeafBinner::new(ctx, dims, depth).expect("binner");
                let roomy = ctx.limits().max_compute_workgroup_storage_size >= PRIVATE_BYTES;
                assert_eq!(
                    binner.uses_workgroup_histogram(),
                    depth <= PRIVATE_MAX_DEPTH && roomy
                );
                let counts = bin_in_batches(binner, &axes, &[1, 1, 778, 2_500]);
                assert_eq!(counts.len(), 1 << depth, "d={dims} r={depth}");
                assert_eq!(
                    counts.iter().sum::<u64>(),
                    axes[0].len() as u64,
                    "d={dims} r={depth}"
                );
                assert!(
                    counts == reference_histogram(&axes, depth),
                    "d={dims} r={depth}: GPU ≠ reference"
                );
            }
        }
    }

    #[test]
    fn all_zero_rows_land_in_the_first_leaf_and_all_max_rows_in_the_last() {
        let Some(ctx) =
            test_context("all_zero_rows_land_in_the_first_leaf_and_all_max_rows_in_the_last")
        else {
            return;
        };
        let rows = 5_000;
        for dims in [1, 2, 3, 5] {
            for depth in [1, 7, 12, 13, 20] {
                let zeros = vec![vec![0u32; rows]; dims];
                let maxima: Vec<Vec<u32>> = (0..dims)
                    .map(|k| vec![((1u64 << axis_bits(dims, depth, k)) - 1) as u32; rows])
                    .collect();
                for (axes, leaf) in [(zeros, 0usize), (maxima, (1 << depth) - 1)] {
                    let counts = bin_in_batches(
                        GpuLeafBinner::new(ctx, dims, depth).expect("binner"),
                        &axes,
                        &[],
                    );
                    let mut expected = vec![0u64; 1 << depth];
                    expected[leaf] = rows as u64;
                    assert!(counts == expected, "d={dims} r={depth} leaf={leaf}");
                }
            }
        }
    }

    #[test]
    fn small_chunks_give_the_same_histogram() {
        let Some(ctx) = test_context("small_chunks_give_the_same_histogram") else {
            return;
        };
        let mut rng = TestRng(13);
        for (dims, depth, chunk) in [(2, 12, 64), (3, 13, 97), (5, 20, 1_000)] {
            let axes = test_rows(&mut rng, dims, depth, 5_000, 10);
            let binner = GpuLeafBinner::with_chunk_rows(ctx, dims, depth, chunk).expect("binner");
            assert_eq!(binner.chunk_rows(), chunk);
            let counts = bin_in_batches(binner, &axes, &[1_234, 1_234, 4_000]);
            assert!(
                counts == reference_histogram(&axes, depth),
                "d={dims} r={depth} chunk={chunk}"
            );
        }
    }

    #[test]
    fn one_dispatch_longer_than_the_workgroup_limit_times_workgroup_size() {
        let Some(ctx) =
            test_context("one_dispatch_longer_than_the_workgroup_limit_times_workgroup_size")
        else {
            return;
        };
        // d = 1 keeps the batch (4 bytes a row) inside the 128 MiB default binding, so it is one chunk
        // and one dispatch that the grid-stride loop must cover. The rows tile a random pool, so the
        // reference is the pool's histogram times the number of whole tiles plus the partial tile.
        let rows = 65_535 * WORKGROUP_SIZE as usize + 4_097;
        let limits = ctx.limits();
        let fits_one_binding = rows as u64 * 4
            <= limits
                .max_storage_buffer_binding_size
                .min(limits.max_buffer_size);
        let mut rng = TestRng(17);
        for depth in [12, 13] {
            let pool = test_rows(&mut rng, 1, depth, 4_099, 0);
            let tiles = rows / pool[0].len();
            let rest = rows % pool[0].len();
            let axis: Vec<u32> = pool[0].iter().copied().cycle().take(rows).collect();
            let binner = GpuLeafBinner::with_chunk_rows(ctx, 1, depth, rows).expect("binner");
            assert_eq!(binner.chunk_rows() == rows, fits_one_binding);
            let counts = bin_in_batches(binner, &[axis], &[]);
            let whole = reference_histogram(&pool, depth);
            let partial = reference_histogram(&[pool[0][..rest].to_vec()], depth);
            let expected: Vec<u64> = whole
                .iter()
                .zip(&partial)
                .map(|(w, p)| w * tiles as u64 + p)
                .collect();
            assert!(counts == expected, "r={depth}");
        }
    }

    #[test]
    fn carries_into_u64_totals_are_exact() {
        let Some(ctx) = test_context("carries_into_u64_totals_are_exact") else {
            return;
        };
        let (dims, depth) = (2, 7);
        let axes = test_rows(&mut TestRng(19), dims, depth, 6_000, 500);
        let reference = reference_histogram(&axes, depth);
        // Start every bin's total just below 2^32 so the carry kernel must ripple into the high word,
        // and carry every 1 000 rows instead of every 2^32 − 1.
        let start = u32::MAX - 40;
        let mut binner = GpuLeafBinner::with_chunk_rows(ctx, dims, depth, 300).expect("binner");
        binner.carry_threshold = 1_000;
        let totals = binner.allocate_totals().expect("totals");
        ctx.queue.write_buffer(
            &totals.lo,
            0,
            bytemuck::cast_slice(&vec![start; 1 << depth]),
        );
        binner.totals = Some(totals);
        let counts = bin_in_batches(binner, &axes, &[2_999]);
        let expected: Vec<u64> = reference
            .iter()
            .map(|&count| count + u64::from(start))
            .collect();
        assert!(counts == expected);
        assert!(
            counts.iter().any(|&count| count >= 1 << 32),
            "no bin crossed 2^32"
        );
    }

    #[test]
    fn broken_contracts_are_errors() {
        let Some(ctx) = test_context("broken_contracts_are_errors") else {
            return;
        };
        let invalid =
            |result: Result<(), GpuError>| matches!(result, Err(GpuError::InvalidInput(_)));
        assert!(matches!(
            GpuLeafBinner::new(ctx, 0, 4),
            Err(GpuError::InvalidInput(_))
        ));
        assert!(matches!(
            GpuLeafBinner::new(ctx, 2, GPU_MAX_DEPTH + 1),
            Err(GpuError::InvalidInput(_))
        ));
        // d = 5, r = 3: axes 0..2 have one bit each, axes 3 and 4 none.
        let mut binner = GpuLeafBinner::new(ctx, 5, 3).expect("binner");
        let ok = [1u32, 0];
        let zero = [0u32, 0];
        assert!(
            invalid(binner.add_batch(&[&ok, &ok, &ok, &zero])),
            "wrong axis count"
        );
        assert!(
            invalid(binner.add_batch(&[&ok, &ok, &ok, &zero, &[0]])),
            "ragged axes"
        );
        assert!(
            invalid(binner.add_batch(&[&ok, &[2, 0], &ok, &zero, &zero])),
            "index ≥ 2^h"
        );
        assert!(
            invalid(binner.add_batch(&[&ok, &ok, &ok, &zero, &[0, 1]])),
            "index on an axis with no bits"
        );
        binner
            .add_batch(&[&ok, &ok, &ok, &zero, &zero])
            .expect("valid batch");
        let counts = binner.finish().expect("finish");
        assert_eq!(
            counts,
            vec![1, 0, 0, 0, 0, 0, 0, 1],
            "rejected batches must count nothing"
        );
    }

    #[test]
    fn policies_rank_adapters_by_device_type() {
        use wgpu::DeviceType::{Cpu, DiscreteGpu, IntegratedGpu, Other, VirtualGpu};
        for software in [Cpu, Other] {
            assert_eq!(adapter_rank(software, AdapterPolicy::RealGpuOnly), None);
            assert!(adapter_rank(software, AdapterPolicy::AnyAdapter).is_some());
        }
        for policy in [AdapterPolicy::RealGpuOnly, AdapterPolicy::AnyAdapter] {
            let rank = |device_type| adapter_rank(device_type, policy);
            assert!(
                rank(DiscreteGpu) > rank(IntegratedGpu) && rank(IntegratedGpu) > rank(VirtualGpu)
            );
        }
        assert!(
            adapter_rank(VirtualGpu, AdapterPolicy::AnyAdapter)
                > adapter_rank(Cpu, AdapterPolicy::AnyAdapter)
        );
    }

    #[test]
    fn real_gpu_policy_never_picks_a_software_adapter() {
        match GpuContext::open(AdapterPolicy::RealGpuOnly) {
            Ok(Some(ctx)) => assert!(!ctx.is_software(), "{}", ctx.adapter_description()),
            Ok(None) => eprintln!("no real GPU here: RealGpuOnly correctly found none"),
            Err(error) => panic!("{error}"),
        }
    }
}
