// Leaf histogram of dpsynth's dyadic partition (SPEC §3), from host-quantised per-axis cell indices.
//
// The host computes every q_k in f64 and uploads integers, so the GPU only interleaves bits and counts:
// the result is bit-identical to the CPU binner by construction.
//
// Leaf code θ: level j (0 ≤ j < r) splits axis k = j mod d and is bit r−1−j of θ. Bit i of q_k (LSB = 0)
// therefore lands at bit base_k + d·i of θ, with base_k = r−1−k−d·(h_k−1). The host passes base_k and
// uploads only the axes with h_k > 0 ("active" axes), axis-major: axes[k·rows + row].
//
// Counts are u32 atomics (WGSL has no portable 64-bit atomics). The host never lets more than 2^32 − 1
// rows reach `counts` between two runs of `carry_into_totals`, which folds them into a u64 per bin kept
// as a lo/hi pair of u32 words, so no bin can overflow.

const WORKGROUP_SIZE: u32 = 256u;
// 2^12 u32 counters = 16 KiB, the WebGPU default for workgroup storage: the privatised path serves r ≤ 12.
const PRIVATE_BINS: u32 = 4096u;

struct BinParams {
    // Rows in the current chunk.
    rows: u32,
    // Axes uploaded (those with h_k > 0): min(d, r).
    active_axes: u32,
    // d: distance in θ between consecutive bits of one axis.
    stride: u32,
    // 2^r.
    bins: u32,
    // base_k for active axis k, packed four to a vec4 (uniform arrays have a 16-byte element stride).
    base: array<vec4<u32>, 8>,
}

@group(0) @binding(0) var<uniform> params: BinParams;
@group(0) @binding(1) var<storage, read> axes: array<u32>;
@group(0) @binding(2) var<storage, read_write> counts: array<atomic<u32>>;
@group(0) @binding(3) var<storage, read_write> totals_lo: array<u32>;
@group(0) @binding(4) var<storage, read_write> totals_hi: array<u32>;

var<workgroup> private_counts: array<atomic<u32>, PRIVATE_BINS>;

// Moves bit i of q to bit stride·i (WGSL has no pdep). Magic-number spreading for d = 2 (≤ 16 bits)
// and d = 3 (≤ 10 bits), a bit loop otherwise; r ≤ 30 bounds every axis to the widths used here.
fn spread_bits(q: u32, stride: u32) -> u32 {
    switch stride {
        case 1u: {
            return q;
        }
        case 2u: {
            var x = q & 0x0000ffffu;
            x = (x | (x << 8u)) & 0x00ff00ffu;
            x = (x | (x << 4u)) & 0x0f0f0f0fu;
            x = (x | (x << 2u)) & 0x33333333u;
            x = (x | (x << 1u)) & 0x55555555u;
            return x;
        }
        case 3u: {
            var x = q & 0x000003ffu;
            x = (x | (x << 16u)) & 0x030000ffu;
            x = (x | (x << 8u)) & 0x0300f00fu;
            x = (x | (x << 4u)) & 0x030c30c3u;
            x = (x | (x << 2u)) & 0x09249249u;
            return x;
        }
        default: {
            var out = 0u;
            var rest = q;
            var position = 0u;
            while (rest != 0u) {
                out |= (rest & 1u) << position;
                rest >>= 1u;
                position += stride;
            }
            return out;
        }
    }
}

fn leaf_code(row: u32) -> u32 {
    var code = 0u;
    for (var k = 0u; k < params.active_axes; k++) {
        let q = axes[k * params.rows + row];
        code |= spread_bits(q, params.stride) << params.base[k / 4u][k % 4u];
    }
    return code;
}

// r ≤ 12: each workgroup counts into its own copy in workgroup memory, then adds the non-zero bins to
// `counts`. The grid is fixed by the host (grid-stride loop), so the flush is amortised over many rows.
@compute @workgroup_size(WORKGROUP_SIZE)
fn bin_private(
    @builtin(local_invocation_index) local_index: u32,
    @builtin(workgroup_id) workgroup_id: vec3<u32>,
    @builtin(num_workgroups) num_workgroups: vec3<u32>,
) {
    for (var bin = local_index; bin < params.bins; bin += WORKGROUP_SIZE) {
        atomicStore(&private_counts[bin], 0u);
    }
    workgroupBarrier();
    let grid_stride = num_workgroups.x * WORKGROUP_SIZE;
    for (var row = workgroup_id.x * WORKGROUP_SIZE + local_index; row < params.rows; row += grid_stride) {
        atomicAdd(&private_counts[leaf_code(row)], 1u);
    }
    workgroupBarrier();
    for (var bin = local_index; bin < params.bins; bin += WORKGROUP_SIZE) {
        let count = atomicLoad(&private_counts[bin]);
        if (count != 0u) {
            atomicAdd(&counts[bin], count);
        }
    }
}

// r > 12: too many bins for workgroup memory; count straight into `counts`.
@compute @workgroup_size(WORKGROUP_SIZE)
fn bin_global(
    @builtin(global_invocation_id) global_id: vec3<u32>,
    @builtin(num_workgroups) num_workgroups: vec3<u32>,
) {
    let grid_stride = num_workgroups.x * WORKGROUP_SIZE;
    for (var row = global_id.x; row < params.rows; row += grid_stride) {
        atomicAdd(&counts[leaf_code(row)], 1u);
    }
}

// Folds the u32 counts into the u64 totals (lo/hi words) and clears them.
@compute @workgroup_size(WORKGROUP_SIZE)
fn carry_into_totals(
    @builtin(global_invocation_id) global_id: vec3<u32>,
    @builtin(num_workgroups) num_workgroups: vec3<u32>,
) {
    let grid_stride = num_workgroups.x * WORKGROUP_SIZE;
    for (var bin = global_id.x; bin < params.bins; bin += grid_stride) {
        let count = atomicExchange(&counts[bin], 0u);
        if (count != 0u) {
            let lo = totals_lo[bin];
            let sum = lo + count;
            totals_lo[bin] = sum;
            if (sum < lo) {
                totals_hi[bin] += 1u;
            }
        }
    }
}
