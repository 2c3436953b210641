// Private Evolution's nearest-neighbour histogram (src/mechanism/pe/nearest_gpu.rs): every private row
// votes for the candidate with the smallest (key, index).
//
// Rows and candidates arrive as integers on the lattice of 2^-21 of the unit cube (rows are the midpoints
// of 2^20 cells per axis; the host snaps candidates to the lattice), so each key is an exact integer: the
// ℓ∞ distance (≤ 2^21) or the squared ℓ2 distance (< d·2^42, a u64 kept as a (lo, hi) pair of u32). The
// CPU computes the same keys exactly in f64, and both scan candidates in index order keeping the first
// strict minimum, so both count the same candidate for every row, ties included.

const WORKGROUP_SIZE: u32 = 256u;
// Candidate coordinates held in workgroup memory at a time (16 KiB, the WebGPU default).
const TILE_WORDS: u32 = 4096u;
// Most coordinates a row may have (the host refuses more): a row is held in registers.
const MAX_DIMS: u32 = 32u;

struct NearestParams {
    // Rows in this dispatch's buffer.
    rows: u32,
    dims: u32,
    candidates: u32,
    // 0: ℓ∞ (the box), 1: squared ℓ2 (the ball).
    euclidean: u32,
    // Candidates per tile: TILE_WORDS / dims.
    tile: u32,
}

@group(0) @binding(0) var<uniform> params: NearestParams;
// Row-major: rows[row * dims + axis].
@group(0) @binding(1) var<storage, read> rows: array<u32>;
// Candidate-major: candidates[candidate * dims + axis].
@group(0) @binding(2) var<storage, read> candidates: array<u32>;
@group(0) @binding(3) var<storage, read_write> counts: array<atomic<u32>>;

var<workgroup> tile: array<u32, TILE_WORDS>;

// k² as (lo, hi) for k < 2^22: k = a·2^16 + b, k² = a²·2^32 + 2ab·2^16 + b².
fn square_wide(k: u32) -> vec2<u32> {
    let a = k >> 16u;
    let b = k & 0xffffu;
    let ab = a * b; // < 2^22
    let middle_lo = ab << 17u; // (2ab·2^16) mod 2^32
    let lo = b * b + middle_lo;
    let carry = select(0u, 1u, lo < middle_lo);
    return vec2<u32>(lo, a * a + (ab >> 15u) + carry);
}

fn add_wide(x: vec2<u32>, y: vec2<u32>) -> vec2<u32> {
    let lo = x.x + y.x;
    return vec2<u32>(lo, x.y + y.y + select(0u, 1u, lo < x.x));
}

fn less_wide(x: vec2<u32>, y: vec2<u32>) -> bool {
    return x.y < y.y || (x.y == y.y && x.x < y.x);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn nearest(
    @builtin(local_invocation_index) local: u32,
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let dims = params.dims;
    var point: array<u32, MAX_DIMS>;
    // A grid-stride loop over blocks of rows; the bounds are uniform in the workgroup, so every
    // invocation reaches the barriers.
    for (var block = group.x * WORKGROUP_SIZE; block < params.rows; block += groups.x * WORKGROUP_SIZE) {
        let row = block + local;
        let in_chunk = row < params.rows;
        if (in_chunk) {
            for (var axis = 0u; axis < dims; axis++) {
                point[axis] = rows[row * dims + axis];
            }
        }
        var best_key = vec2<u32>(0xffffffffu, 0xffffffffu);
        var best = 0u;
        for (var start = 0u; start < params.candidates; start += params.tile) {
            let count = min(params.tile, params.candidates - start);
            workgroupBarrier();
            for (var word = local; word < count * dims; word += WORKGROUP_SIZE) {
                tile[word] = candidates[start * dims + word];
            }
            workgroupBarrier();
            if (in_chunk) {
                for (var c = 0u; c < count; c++) {
                    var key = vec2<u32>(0u, 0u);
                    for (var axis = 0u; axis < dims; axis++) {
                        let x = point[axis];
                        let y = tile[c * dims + axis];
                        let gap = max(x, y) - min(x, y);
                        if (params.euclidean == 0u) {
                            key.x = max(key.x, gap);
                        } else {
                            key = add_wide(key, square_wide(gap));
                        }
                    }
                    if (less_wide(key, best_key)) {
                        best_key = key;
                        best = start + c;
                    }
                }
            }
        }
        if (in_chunk) {
            atomicAdd(&counts[best], 1u);
        }
    }
}
