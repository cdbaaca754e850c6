// capscan-probe --kernels: simdgroup_mm (compiled at MSL 2.3, which introduced
// simdgroup matrices).  Two kernels, each against a CPU reference; a pass is
// necessary for llama.cpp's simdgroup-matrix kernels (has_simdgroup_mm gate),
// not sufficient: only llama.cpp's own test-backend-ops runs those.
//
// capscan_simdgroup_mm uses the constructs of ggml-metal.metal's kernel_mul_mm:
// tiles staged in threadgroup memory, simdgroup_load into 8x8 matrices,
// simdgroup_multiply_accumulate, simdgroup_store.
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

// capscan_simdgroup_mm_fa: the shape of the Q*K^T step of ggml-metal.metal's
// kernel_flash_attn_ext (and kernel_mul_mm's half x half -> float
// accumulation, S0_8x8/S1_8x8 simdgroup_half8x8 into simdgroup_float8x8 mc):
//   - 128 threads, four SIMD groups, each with its own 8-column block
//     (flash attention and mul_mm dispatch 4 SIMD groups per threadgroup);
//   - Q staged from device to threadgroup memory (sq), K read straight from
//     device memory with a transposed load, as
//     `simdgroup_load(mk, pk + 8*i, NS10, 0, true)` does for the K cache;
//   - simdgroup_half8x8 x simdgroup_half8x8 accumulated into a
//     simdgroup_float8x8 (qk8x8_t mqk), stored to device memory;
//   - a function constant (llama.cpp specialises with FC_mul_mm_* and
//     FC_flash_attn_ext_* bools): the probe sets FC_capscan_bias = true, and
//     the reference includes C only then, so an ignored constant is a fail.
// src: Q (8x8 half, row-major) at byte 0, K (32 keys x 8 half, one key per
// row) at byte 128, C (8x32 float) at byte 640.  dst (8x32 float) gets
// S = Q * K^T + C.  All values are small integers: exact in half and float.
constant bool FC_capscan_bias [[function_constant(0)]];

kernel void capscan_simdgroup_mm_fa(
        device const char  * src  [[buffer(0)]],
        device       float * dst  [[buffer(1)]],
        ushort tiitg [[thread_index_in_threadgroup]],
        ushort sgitg [[simdgroup_index_in_threadgroup]]) {
    device const half  * q = (device const half  *) src;
    device const half  * k = (device const half  *) (src + 128);
    device const float * c = (device const float *) (src + 640);

    threadgroup half sq[64];
    if (tiitg < 64) {
        sq[tiitg] = q[tiitg];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);

    simdgroup_float8x8 mqk = make_filled_simdgroup_matrix<float, 8>(0.0f);
    if (FC_capscan_bias) {
        simdgroup_load(mqk, c + 8*sgitg, 32);
    }

    simdgroup_half8x8 mq;
    simdgroup_half8x8 mk;
    simdgroup_load(mq, sq, 8);
    simdgroup_load(mk, k + 64*sgitg, 8, 0, true);   // keys 8*sgitg.. as columns: K^T
    simdgroup_multiply_accumulate(mqk, mq, mk, mqk);

    simdgroup_store(mqk, dst + 8*sgitg, 32);
}
