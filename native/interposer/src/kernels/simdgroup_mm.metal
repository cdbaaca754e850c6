// capscan-probe --kernels: simdgroup_mm (compiled at MSL 2.3, which introduced
// simdgroup matrices).
//
// Mirrors llama.cpp's kernel_mul_mm in ggml-metal.metal (has_simdgroup_mm
// gate): stage the tiles in threadgroup memory, simdgroup_load them into
// simdgroup_half8x8 (the src0 tiles, `ma`) and simdgroup_float8x8 (`mb`, `mc`)
// matrices, simdgroup_multiply_accumulate, simdgroup_store the result.
//
// One threadgroup of 32 threads (one SIMD group).  src holds three row-major
// 8x8 float matrices A, B, C of small integers; dst gets D = A*B + C twice:
// dst[0..63] from simdgroup_float8x8, dst[64..127] from simdgroup_half8x8.
// Every input, product and partial sum is an integer below 64 in magnitude,
// exactly representable in half as well as float.
#include <metal_stdlib>
#include <metal_simdgroup_matrix>
using namespace metal;

kernel void capscan_simdgroup_mm(
        device const float * src  [[buffer(0)]],
        device       float * dst  [[buffer(1)]],
        ushort tiitg [[thread_index_in_threadgroup]]) {
    threadgroup float sf[4*64];   // A, B, C, D as float
    threadgroup half  sh[4*64];   // A, B, C, D as half

    for (ushort i = tiitg; i < 3*64; i += 32) {
        sf[i] = src[i];
        sh[i] = (half) src[i];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);

    simdgroup_float8x8 fa, fb, fc;
    simdgroup_load(fa, sf +   0, 8);
    simdgroup_load(fb, sf +  64, 8);
    simdgroup_load(fc, sf + 128, 8);
    simdgroup_multiply_accumulate(fc, fa, fb, fc);
    simdgroup_store(fc, sf + 192, 8);

    simdgroup_half8x8 ha, hb, hc;
    simdgroup_load(ha, sh +   0, 8);
    simdgroup_load(hb, sh +  64, 8);
    simdgroup_load(hc, sh + 128, 8);
    simdgroup_multiply_accumulate(hc, ha, hb, hc);
    simdgroup_store(hc, sh + 192, 8);

    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (ushort i = tiitg; i < 64; i += 32) {
        dst[i]      = sf[192 + i];
        dst[64 + i] = (float) sh[192 + i];
    }
}
