/* libfakemetal: a stand-in for Metal.framework on Linux (GCC libobjc).
 *
 * CAPSCAN_FAKE_METAL_DEVICE selects what MTLCreateSystemDefaultDevice and
 * MTLCopyAllDevices return:
 *   paravirtual (default)  "Apple Paravirtual device": Apple1-5, Mac2 and
 *                          Common1-3 true; Apple6+, Metal3/4 false; 32 KiB
 *   m1-ultra               a bare-metal host: Apple1-7, Mac2, Common1-3,
 *                          Metal3 and Metal4 true
 *   incomplete             paravirtual answers from a class that lacks
 *                          maxThreadgroupMemoryLength
 *   paravirtual-no-init    paravirtual, but created without calling
 *                          -initGPUFamilySupport (the init hook never fires)
 *   none                   no device (nil, empty array)
 *
 * Like Metal's, the concrete device classes inherit from a private base
 * class _MTLDevice, and every factory calls -[_MTLDevice
 * initGPUFamilySupport] while it creates the device (the hook point of the
 * published shims).
 *
 * For capscan-probe --kernels the base device also compiles and runs
 * "libraries": newLibraryWithSource:options:error: (NSString source,
 * MTLCompileOptions with a languageVersion) gives a library whose
 * newFunctionWithName: finds the `kernel void <name>(` in the source; then
 * pipeline, queue, command buffer, compute encoder and shared buffers, and
 * commit computes the probe's three kernels on the CPU (simd_sum/simd_max
 * over 32 lanes, the 8x8 float and half multiply-accumulate, the float ->
 * bfloat -> float round trip, round to nearest even).  The command buffer
 * reports Scheduled on the first status poll and Completed after that.  A
 * source using bfloat with a languageVersion below 3.1 does not compile.
 *
 * CAPSCAN_FAKE_METAL_KERNELS selects what the kernels do:
 *   pass (default)   correct numbers
 *   fail             wrong numbers (simd_sum lane 3 gives 0; float8x8 element
 *                    9 is off by one; bfloat passes floats through unrounded)
 *   compile-error    newLibraryWithSource returns nil and an NSError whose
 *                    localizedDescription is a Metal-compiler-style message
 *                    ("program_source:L:C: error: ...", with newlines)
 *   timeout          the command buffer never completes (status stays 2)
 *   gpu-timeout      the command buffer ends in status Error (5) with an NSError
 *                    of code 2, MTLCommandBufferErrorTimeout (the GPU watchdog)
 *   crash            dispatchThreadgroups:threadsPerThreadgroup: writes a line
 *                    to stderr and raises SIGSEGV
 *   hang             newLibraryWithSource never returns (the probe's parent
 *                    must kill its child)
 * or per capability, e.g. "simdgroup_mm=fail,bfloat=compile-error"
 * (capabilities simdgroup_reduction, simdgroup_mm, bfloat; unlisted ones
 * pass), or per kernel name, e.g. "capscan_simdgroup_mm_fa=fail" (a kernel
 * name is looked up before its capability).  The capability is recognised by
 * the kernel's name in the source (capscan_simdgroup_reduction,
 * capscan_simdgroup_mm, capscan_bfloat); its kernels are capscan_simdgroup_mm
 * and capscan_simdgroup_mm_fa (128 threads, function constant 0 = bias), and
 * capscan_bfloat and capscan_bfloat_mm.  compile-error, hang and timeout act
 * on the library (a capability), fail and crash on the kernel that runs.
 * CAPSCAN_FAKE_METAL_KERNELS_INJECTED, when set, replaces
 * CAPSCAN_FAKE_METAL_KERNELS whenever the device claims Apple7 (1007) that its
 * profile lacks, i.e. with the interposer loaded: a driver that fails only
 * once the claims are raised.
 *
 * Metal is not fork-safe: MTLCreateSystemDefaultDevice in a child that fork()ed
 * from a process that loaded this library, without exec, writes
 * "libfakemetal: Metal used in a forked child without exec" and aborts
 * (SIGABRT), as the probe's kernel checks would risk on macOS.
 * CAPSCAN_FAKE_METAL_COMPILE_ERROR, when set, replaces the compile-error text
 * (tests of the probe's cleaning: control characters, length).
 *
 * sysctlbyname (macOS has it, glibc does not) answers three names:
 *   machdep.cpu.brand_string  CAPSCAN_FAKE_CPU_BRAND (default "Apple M1 Ultra (Virtual)")
 *   kern.hv_vmm_present       CAPSCAN_FAKE_HV_VMM_PRESENT (int, default 1)
 *   kern.osproductversion     CAPSCAN_FAKE_OS_VERSION (default "15.5")
 * A variable set to the empty string makes its name unavailable (-1, ENOENT),
 * as is every other name. */
#ifndef CAPSCAN_FAKE_METAL_H
#define CAPSCAN_FAKE_METAL_H

#include <stddef.h>
#include <objc/objc.h>

__attribute__((objc_root_class))
@interface FakeMTLObject
{
    Class isa;
}
+ (id)new;
@end

@interface FakeMTLString : FakeMTLObject
{
@public
    const char *utf8;
}
+ (id)stringWithUTF8:(const char *)text;
- (const char *)UTF8String;
@end

@interface FakeMTLArray : FakeMTLObject
{
@public
    id items[4];
    unsigned long n;
}
- (unsigned long)count;
- (id)objectAtIndex:(unsigned long)index;
@end

/* The private base class: the concrete device classes inherit all of
 * these, like Metal's concrete devices inherit from _MTLDevice. */
@interface _MTLDevice : FakeMTLObject
{
@public
    const void *profile;
    int family_support_initialised;
}
- (void)initGPUFamilySupport;
- (id)name;
- (BOOL)supportsFamily:(long)family;
- (unsigned long)maxThreadgroupMemoryLength;
- (unsigned long long)recommendedMaxWorkingSetSize;
- (BOOL)hasUnifiedMemory;
- (unsigned long long)registryID;
- (id)newLibraryWithSource:(id)source options:(id)options error:(id *)error;
- (id)newComputePipelineStateWithFunction:(id)function error:(id *)error;
- (id)newCommandQueue;
- (id)newBufferWithBytes:(const void *)bytes length:(unsigned long)length options:(unsigned long)options;
@end

/* Foundation and Metal classes the probe looks up by name. */
@interface NSString : FakeMTLObject
{
@public
    char *utf8;
}
+ (id)stringWithUTF8String:(const char *)text;
- (const char *)UTF8String;
@end

@interface NSError : FakeMTLObject
{
@public
    id description;
    long code;
}
- (id)localizedDescription;
- (long)code;
@end

@interface MTLCompileOptions : FakeMTLObject
{
@public
    unsigned long languageVersion;
}
- (void)setLanguageVersion:(unsigned long)version;
- (unsigned long)languageVersion;
@end

/* Only bool constants (MTLDataTypeBool, 53) at indices 0-3; others are ignored. */
@interface MTLFunctionConstantValues : FakeMTLObject
{
@public
    int set[4];
    unsigned char value[4];
}
- (void)setConstantValue:(const void *)bytes type:(unsigned long)type atIndex:(unsigned long)index;
@end

typedef struct {
    unsigned long width, height, depth;
} FakeMTLSize;

int sysctlbyname(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);

id MTLCreateSystemDefaultDevice(void);
id MTLCopyAllDevices(void);
/* A device a framework creates for itself, without the two public factory
 * functions (which capscan interposes): only the init hook can reach it. */
id FakeMTLCreateDeviceInternally(void);

#endif
