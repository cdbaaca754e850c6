// capscan-probe --kernels: bfloat (compiled as its own library at MSL 3.1,
// MTLLanguageVersion3_1, the first version with the bfloat type).
//
// Mirrors llama.cpp's ggml-metal.metal, whose bfloat kernels (bfloat4x4
// dequantize_bf16, kernel_mul_mv_bf16_*, kernel_cpy_f32_bf16, the bf16 flash
// attention variants) sit under `#if defined(GGML_METAL_HAS_BF16)` (earlier
// releases: GGML_METAL_USE_BF16), undefined again when __METAL_VERSION__ < 310;
// the host side sets the macro when the device has_bfloat.
//
// 32 threads; each converts one float to bfloat and back.  bfloat keeps 8
// significand bits, so the probe accepts |got - x| <= |x| * 2^-7 (round to
// nearest is within 2^-8; 2^-7 also admits truncation) and requires 1/3, which
// bfloat cannot hold, to come back changed.
#include <metal_stdlib>
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
