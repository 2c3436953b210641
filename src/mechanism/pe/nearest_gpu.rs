//! The nearest-neighbour histogram on a wgpu device (`--device gpu`): every row scans every candidate
//! (`shaders/nearest_candidate.wgsl`), which is what a GPU does well; the CPU uses the k-d tree.
//!
//! Both give the same counts by construction: rows and candidates lie on the lattice of
//! 2^−[`LATTICE_BITS`] of the cube (rows by their quantisation, candidates snapped by
//! [`snap_to_lattice`]), where every key is an exact integer on the GPU and exactly representable in
//! f64 on the CPU, and both keep the smallest (key, index). The rows are uploaded once per release, in
//! buffers within the adapter's binding limit; each step uploads the candidates and reads back one u32
//! count per candidate (more often only past 2^32 − 1 rows, so no count can wrap).

use bytemuck::{Pod, Zeroable};

use super::nearest::{Metric, LATTICE_BITS};
use crate::binner::gpu::{
    read_words, GpuContext, GpuError, MAX_WORKGROUPS, SOFTWARE_MAX_WORKGROUPS, WORKGROUP_SIZE,
};

/// Most coordinates a row may have on the GPU; must equal `MAX_DIMS` in the shader.
pub const GPU_MAX_DIMS: usize = 32;
/// Candidate coordinates per workgroup tile; must equal `TILE_WORDS` in the shader.
const TILE_WORDS: usize = 4096;
/// Rows per buffer at most, so `row * dims` stays far from u32 wrap-around in the shader.
const MAX_BUFFER_ROWS: usize = 1 << 24;
const SHADER_SOURCE: &str = include_str!("../../../shaders/nearest_candidate.wgsl");

/// Uniform block of the shader (`NearestParams`).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct NearestParams {
    rows: u32,
    dims: u32,
    candidates: u32,
    euclidean: u32,
    tile: u32,
    _padding: [u32; 3],
}

/// A coordinate of the lattice as the shader's integer.
fn lattice_word(x: f64) -> u32 {
    let scaled = x * f64::from(1u32 << LATTICE_BITS);
    debug_assert!(scaled.fract() == 0.0 && (0.0..=f64::from(1u32 << LATTICE_BITS)).contains(&scaled));
    scaled as u32
}

/// `values` (lattice coordinates) as the shader's integers in a new storage buffer.
fn upload_lattice(ctx: &GpuContext, label: &'static str, values: &[f64]) -> wgpu::Buffer {
    let words: Vec<u32> = values.iter().map(|&x| lattice_word(x)).collect();
    let buffer = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: 4 * words.len() as u64,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    ctx.queue.write_buffer(&buffer, 0, bytemuck::cast_slice(&words));
    buffer
}

/// The private rows resident on one device, ready to be counted against each step's candidates.
pub struct GpuNearest {
    ctx: GpuContext,
    metric: Metric,
    dims: usize,
    /// Row buffers and their row counts.
    row_buffers: Vec<(wgpu::Buffer, u32)>,
    params_buffer: wgpu::Buffer,
    pipeline: wgpu::ComputePipeline,
    workgroup_limit: u32,
}

impl GpuNearest {
    /// Uploads `rows` (flat, `dims` per row, on the lattice).
    pub fn new(ctx: &GpuContext, metric: Metric, dims: usize, rows: &[f64]) -> Result<Self, GpuError> {
        if dims == 0 || dims > GPU_MAX_DIMS {
            return Err(ctx.unsupported(format!(
                "the nearest-neighbour kernel takes 1 to {GPU_MAX_DIMS} columns, got {dims}"
            )));
        }
        let limits = ctx.limits();
        if limits.max_compute_invocations_per_workgroup < WORKGROUP_SIZE
            || limits.max_compute_workgroup_size_x < WORKGROUP_SIZE
            || limits.max_compute_workgroup_storage_size < (4 * TILE_WORDS) as u32
        {
            return Err(ctx.unsupported(format!(
                "the nearest-neighbour kernel needs workgroups of {WORKGROUP_SIZE} invocations and {} bytes \
                 of workgroup memory",
                4 * TILE_WORDS
            )));
        }
        let max_binding = limits.max_storage_buffer_binding_size.min(limits.max_buffer_size);
        let buffer_rows = (max_binding / (4 * dims as u64)).min(MAX_BUFFER_ROWS as u64) as usize;
        let device = &ctx.device;
        let row_buffers = rows
            .chunks(buffer_rows * dims)
            .map(|chunk| (upload_lattice(ctx, "pe rows", chunk), (chunk.len() / dims) as u32))
            .collect();
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("nearest_candidate"),
            source: wgpu::ShaderSource::Wgsl(SHADER_SOURCE.into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("nearest"),
            layout: None,
            module: &module,
            entry_point: Some("nearest"),
            compilation_options: wgpu::PipelineCompilationOptions::default(),
            cache: None,
        });
        let params_buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("nearest params"),
            size: std::mem::size_of::<NearestParams>() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let workgroup_limit = if ctx.is_software() {
            SOFTWARE_MAX_WORKGROUPS
        } else {
            MAX_WORKGROUPS
        };
        ctx.check("uploading the rows of the nearest-neighbour histogram")?;
        Ok(GpuNearest {
            ctx: ctx.clone(),
            metric,
            dims,
            row_buffers,
            params_buffer,
            pipeline,
            workgroup_limit: workgroup_limit.min(limits.max_compute_workgroups_per_dimension).max(1),
        })
    }

    /// Entry j: the rows whose nearest candidate is j (ties to the smallest j). `candidates` are on
    /// the lattice (flat, `dims` per point).
    pub fn counts(&self, candidates: &[f64]) -> Result<Vec<u64>, GpuError> {
        let (ctx, dims) = (&self.ctx, self.dims);
        let count = candidates.len() / dims;
        let mut totals = vec![0u64; count];
        if count == 0 {
            return Ok(totals);
        }
        let candidates_buffer = upload_lattice(ctx, "pe candidates", candidates);
        let counts_buffer = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("pe nearest counts"),
            size: 4 * count as u64,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut rows_since_read = 0u64;
        for (rows_buffer, rows) in &self.row_buffers {
            if rows_since_read + u64::from(*rows) > u64::from(u32::MAX) {
                add_counts(&mut totals, &read_words(ctx, &counts_buffer)?);
                rows_since_read = 0;
            }
            let clear = rows_since_read == 0;
            self.dispatch(rows_buffer, *rows, &candidates_buffer, count, &counts_buffer, clear)?;
            rows_since_read += u64::from(*rows);
        }
        add_counts(&mut totals, &read_words(ctx, &counts_buffer)?);
        Ok(totals)
    }

    fn dispatch(
        &self,
        rows_buffer: &wgpu::Buffer,
        rows: u32,
        candidates_buffer: &wgpu::Buffer,
        candidates: usize,
        counts_buffer: &wgpu::Buffer,
        clear: bool,
    ) -> Result<(), GpuError> {
        let ctx = &self.ctx;
        let params = NearestParams {
            rows,
            dims: self.dims as u32,
            candidates: candidates as u32,
            euclidean: u32::from(self.metric == Metric::Euclidean),
            tile: (TILE_WORDS / self.dims) as u32,
            _padding: [0; 3],
        };
        ctx.queue.write_buffer(&self.params_buffer, 0, bytemuck::bytes_of(&params));
        let bind_group = ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("nearest"),
            layout: &self.pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry { binding: 0, resource: self.params_buffer.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 1, resource: rows_buffer.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 2, resource: candidates_buffer.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 3, resource: counts_buffer.as_entire_binding() },
            ],
        });
        let mut encoder = ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        if clear {
            encoder.clear_buffer(counts_buffer, 0, None);
        }
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: None,
            });
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            pass.dispatch_workgroups(rows.div_ceil(WORKGROUP_SIZE).clamp(1, self.workgroup_limit), 1, 1);
        }
        ctx.queue.submit([encoder.finish()]);
        ctx.check("counting nearest candidates")
    }
}

fn add_counts(totals: &mut [u64], counts: &[u32]) {
    for (total, &count) in totals.iter_mut().zip(counts) {
        *total += u64::from(count);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binner::gpu::AdapterPolicy;
    use crate::mechanism::pe::nearest::{nearest_neighbour_counts, snap_to_lattice};
    use crate::testing::case_rng;
    use rand::RngExt;
    use rand_xoshiro::Xoshiro256PlusPlus;
    use std::io::Write;

    /// An adapter (lavapipe on CI), or None after a loud SKIPPED line; CI sets DPSYNTH_REQUIRE_GPU so
    /// that a missing adapter fails there.
    fn context() -> Option<GpuContext> {
        let context = GpuContext::open(AdapterPolicy::AnyAdapter).expect("an adapter exists but cannot be used");
        if context.is_none() {
            assert!(
                std::env::var_os("DPSYNTH_REQUIRE_GPU").is_none(),
                "DPSYNTH_REQUIRE_GPU is set but no wgpu adapter exists"
            );
            let _ = writeln!(std::io::stderr(), "SKIPPED: no wgpu adapter; the PE kernel was not tested");
        }
        context
    }

    /// Points on a coarse sub-lattice (many exact ties), or anywhere on the fine lattice, with the
    /// lattice's extremes 0 and 1 included.
    fn fine_lattice_points(rng: &mut Xoshiro256PlusPlus, count: usize, dims: usize, steps: u32) -> Vec<f64> {
        (0..count * dims)
            .map(|i| match i % 5 {
                0 => f64::from(rng.random_range(0..=steps)) / f64::from(steps),
                1 => snap_to_lattice(rng.random::<f64>()),
                2 => f64::from(2 * rng.random_range(0..1u32 << (LATTICE_BITS - 1)) + 1)
                    / f64::from(1u32 << LATTICE_BITS),
                _ => f64::from(rng.random_range(0..=steps)) / f64::from(steps),
            })
            .collect()
    }

    #[test]
    fn the_kernel_counts_what_the_cpu_counts() {
        let Some(ctx) = context() else { return };
        let mut rng = case_rng(17);
        for metric in [Metric::Chebyshev, Metric::Euclidean] {
            for dims in [1, 2, 3, 5] {
                for (candidates, steps) in [(1, 4), (37, 8), (900, 16), (5000, 1024)] {
                    let mut points = fine_lattice_points(&mut rng, candidates, dims, steps);
                    let copy = points[..dims].to_vec();
                    points.extend_from_slice(&copy);
                    let rows = fine_lattice_points(&mut rng, 3000, dims, 2 * steps);
                    let gpu = GpuNearest::new(&ctx, metric, dims, &rows).unwrap();
                    assert_eq!(
                        gpu.counts(&points).unwrap(),
                        nearest_neighbour_counts(metric, &points, dims, &rows),
                        "{metric:?} d={dims} m={candidates}"
                    );
                }
            }
        }
    }

    #[test]
    fn rows_in_several_buffers_and_the_widest_rows_count_alike() {
        let Some(ctx) = context() else { return };
        let mut rng = case_rng(4);
        let dims = GPU_MAX_DIMS;
        let rows = fine_lattice_points(&mut rng, 700, dims, 4);
        let points = fine_lattice_points(&mut rng, 300, dims, 4);
        let mut gpu = GpuNearest::new(&ctx, Metric::Euclidean, dims, &rows).unwrap();
        let whole = gpu.counts(&points).unwrap();
        assert_eq!(whole, nearest_neighbour_counts(Metric::Euclidean, &points, dims, &rows));
        // The same rows split over buffers of 256 rows.
        gpu.row_buffers = rows
            .chunks(256 * dims)
            .map(|chunk| GpuNearest::new(&ctx, Metric::Euclidean, dims, chunk).unwrap().row_buffers.remove(0))
            .collect();
        assert_eq!(gpu.row_buffers.len(), 3);
        assert_eq!(gpu.counts(&points).unwrap(), whole);
        assert!(GpuNearest::new(&ctx, Metric::Euclidean, dims + 1, &[0.5; 33]).is_err());
    }
}
