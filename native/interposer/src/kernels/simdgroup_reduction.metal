// capscan-probe --kernels: simdgroup_reduction (compiled at MSL 2.3).
//
// Mirrors llama.cpp's ggml-metal.metal, which reduces across a SIMD group with
// simd_sum (kernel_rms_norm, kernel_norm, the mul_mv kernels) and simd_max
// (kernel_soft_max, kernel_argmax, flash attention), inside
// ggml_metal_device's has_simdgroup_reduction gate.
//
// One threadgroup of 32 threads (one SIMD group on Apple GPUs).  Input lane i
// holds (i * 13) % 32: a permutation of 0..31, so every lane must see
// simd_sum == 496 and simd_max == 31 (which lives in lane 27, not the last one).
// Integer-valued floats: the sum is exact, the probe compares bit for bit.
#include <metal_stdlib>
using namespace metal;

kernel void capscan_simdgroup_reduction(
        device const float * src  [[buffer(0)]],
        device       float * dst  [[buffer(1)]],
        ushort tiitg [[thread_index_in_threadgroup]]) {
    const float v = src[tiitg];
    dst[tiitg]      = simd_sum(v);
    dst[32 + tiitg] = simd_max(v);
}
