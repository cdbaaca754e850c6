// capscan-probe --kernels: bfloat (compiled as its own library at MSL 3.1,
// MTLLanguageVersion3_1, the first version with the bfloat type).
//
// llama.cpp's ggml-metal.metal's bfloat kernels (bfloat4x4
// dequantize_bf16, kernel_mul_mv_bf16_*, kernel_cpy_f32_bf16, the bf16 flash
// attention variants) sit under `#if defined(GGML_METAL_HAS_BF16)` (earlier
// releases: GGML_METAL_USE_BF16), undefined again when __METAL_VERSION__ < 310;
// the host side sets the macro when the device has_bfloat.
//
// A pass is necessary for those kernels, not sufficient (test-backend-ops runs
// the real ones).
//
// capscan_bfloat: 32 threads; each converts one float to bfloat and back.  bfloat keeps 8
// significand bits, so the probe accepts |got - x| <= |x| * 2^-7 (round to
// nearest is within 2^-8; 2^-7 also admits truncation) and requires 1/3, which
// bfloat cannot hold, to come back changed.
#include <metal_stdlib>
#include <metal_simdgroup_matrix>
using namespace metal;

#if __METAL_VERSION__ < 310
#error "bfloat needs Metal Shading Language 3.1"
#endif

kernel void capscan_bfloat(
        device const float * src  [[buffer(0)]],
        device       float * dst  [[buffer(1)]],
        ushort tiitg [[thread_index_in_threadgroup]]) {
    const bfloat b = (bfloat) src[tiitg];
    dst[tiitg] = (float) b;
}

// capscan_bfloat_mm: kernel_mul_mm_bf16_f32's types, kernel_mul_mm<bfloat, ...,
// simdgroup_bfloat8x8, bfloat, ..., simdgroup_bfloat8x8, ...>: two
// simdgroup_bfloat8x8 tiles from threadgroup memory, accumulated into a
// simdgroup_float8x8 (mc), stored as float.  src holds A, B, C (8x8 float,
// row-major, small integers, exact in bfloat); dst gets D = A*B + C, exact.
kernel void capscan_bfloat_mm(
        device const float * src  [[buffer(0)]],
        device       float * dst  [[buffer(1)]],
        ushort tiitg [[thread_index_in_threadgroup]]) {
    threadgroup bfloat sb[2*64];
    threadgroup float  sc[2*64];

    for (ushort i = tiitg; i < 2*64; i += 32) {
        sb[i] = (bfloat) src[i];
    }
    for (ushort i = tiitg; i < 64; i += 32) {
        sc[i] = src[128 + i];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);

    simdgroup_bfloat8x8 ma;
    simdgroup_bfloat8x8 mb;
    simdgroup_float8x8  mc;
    simdgroup_load(ma, sb +  0, 8);
    simdgroup_load(mb, sb + 64, 8);
    simdgroup_load(mc, sc +  0, 8);
    simdgroup_multiply_accumulate(mc, ma, mb, mc);
    simdgroup_store(mc, sc + 64, 8);

    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (ushort i = tiitg; i < 64; i += 32) {
        dst[i] = sc[64 + i];
    }
}
