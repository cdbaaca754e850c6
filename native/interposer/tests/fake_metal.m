/* libfakemetal.so: fake Metal device classes and factory functions, the
 * compute path capscan-probe --kernels drives, and sysctlbyname (see
 * fake_metal.h for the environment variables). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <objc/runtime.h>

#include "fake_metal.h"

struct profile {
    const char *name;
    long families[16];          /* supported codes, 0-terminated */
    unsigned long tg_memory;
    unsigned long long working_set;
    BOOL unified;
};

static const struct profile paravirtual = {
    "Apple Paravirtual device",
    {1001, 1002, 1003, 1004, 1005, 2002, 3001, 3002, 3003, 0},
    32768, 11453251584ULL, YES
};

static const struct profile m1_ultra = {
    "Apple M1 Ultra",
    {1001, 1002, 1003, 1004, 1005, 1006, 1007, 2002, 3001, 3002, 3003, 5001, 5002, 0},
    32768, 115448725504ULL, YES
};

@implementation FakeMTLObject
+ (id)new
{
    return class_createInstance(self, 0);
}
@end

@implementation FakeMTLString
+ (id)stringWithUTF8:(const char *)text
{
    FakeMTLString *s = [self new];
    s->utf8 = text;
    return s;
}
- (const char *)UTF8String
{
    return utf8;
}
@end

@implementation FakeMTLArray
- (unsigned long)count
{
    return n;
}
- (id)objectAtIndex:(unsigned long)index
{
    return index < n ? items[index] : nil;
}
@end

/* ------------------------------------------------------------ --kernels */

enum { CAP_REDUCTION, CAP_MM, CAP_BFLOAT, CAP_COUNT, CAP_NONE = -1 };
static const char *const cap_names[CAP_COUNT] = {"simdgroup_reduction", "simdgroup_mm", "bfloat"};
static const char *const cap_functions[CAP_COUNT] = {
    "capscan_simdgroup_reduction", "capscan_simdgroup_mm", "capscan_bfloat"
};
enum { MODE_PASS, MODE_FAIL, MODE_COMPILE_ERROR, MODE_TIMEOUT, MODE_CRASH, MODE_HANG, MODE_GPU_TIMEOUT };

/* The kernels of each capability's library (src/kernels/\*.metal). */
enum { FN_REDUCTION, FN_MM, FN_MM_FA, FN_BFLOAT, FN_BFLOAT_MM, FN_COUNT, FN_NONE = -1 };
static const char *const fn_names[FN_COUNT] = {
    "capscan_simdgroup_reduction", "capscan_simdgroup_mm", "capscan_simdgroup_mm_fa", "capscan_bfloat",
    "capscan_bfloat_mm"
};
static const int fn_caps[FN_COUNT] = {CAP_REDUCTION, CAP_MM, CAP_MM, CAP_BFLOAT, CAP_BFLOAT};

/* The last device made, and whether its profile has Apple7: with the
 * interposer loaded its supportsFamily:1007 answers YES beyond the profile. */
static id last_device;
static int profile_has(const void *profile, long family);

static int injected(void)
{
    _MTLDevice *d = (_MTLDevice *)last_device;
    return d && class_respondsToSelector(object_getClass(d), @selector(initGPUFamilySupport)) &&
           !profile_has(d->profile, 1007) && [d supportsFamily:1007];
}

/* Metal is not fork-safe: a forked child that did not exec must not use it. */
static int forked_without_exec;
static void note_fork(void)
{
    forked_without_exec = 1;
}
__attribute__((constructor)) static void fake_metal_init(void)
{
    pthread_atfork(NULL, NULL, note_fork);
}

static int parse_mode(const char *word, size_t n)
{
    static const char *const names[] = {"pass", "fail", "compile-error", "timeout", "crash", "hang", "gpu-timeout"};
    unsigned i;
    for (i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == n && strncmp(word, names[i], n) == 0)
            return (int)i;
    static int warned;
    if (!warned++)
        fprintf(stderr, "libfakemetal: unknown CAPSCAN_FAKE_METAL_KERNELS mode '%.*s' (using pass)\n", (int)n, word);
    return MODE_PASS;
}

/* The mode named for key in "key=mode,key=mode", or -1. */
static int spec_lookup(const char *spec, const char *key)
{
    const char *item;

    for (item = spec; *item; ) {
        const char *end = strchr(item, ',');
        const char *eq = strchr(item, '=');
        size_t len = end ? (size_t)(end - item) : strlen(item);
        if (eq && eq < item + len && (size_t)(eq - item) == strlen(key) && strncmp(item, key, (size_t)(eq - item)) == 0)
            return parse_mode(eq + 1, len - (size_t)(eq + 1 - item));
        item += len;
        if (*item == ',')
            item++;
    }
    return -1;
}

/* CAPSCAN_FAKE_METAL_KERNELS (or _INJECTED, see fake_metal.h): one mode for all,
 * or key=mode,... where a key is a kernel name or a capability. */
static int kernel_mode_of(int cap, int fn)
{
    const char *spec = getenv("CAPSCAN_FAKE_METAL_KERNELS");
    const char *when_injected = getenv("CAPSCAN_FAKE_METAL_KERNELS_INJECTED");
    int mode = -1;

    if (when_injected && injected())
        spec = when_injected;
    if (!spec || !*spec || cap == CAP_NONE)
        return MODE_PASS;
    if (!strchr(spec, '='))
        return parse_mode(spec, strlen(spec));
    if (fn != FN_NONE)
        mode = spec_lookup(spec, fn_names[fn]);
    if (mode < 0)
        mode = spec_lookup(spec, cap_names[cap]);
    return mode < 0 ? MODE_PASS : mode;
}

static int kernel_mode(int cap)
{
    return kernel_mode_of(cap, FN_NONE);
}

static int fn_mode(int fn)
{
    return fn == FN_NONE ? MODE_PASS : kernel_mode_of(fn_caps[fn], fn);
}

static id fake_error(const char *text, long code)
{
    NSError *e = [NSError new];
    e->description = [NSString stringWithUTF8String:text];
    e->code = code;
    return e;
}

/* "program_source:L:C: error: TEXT\n<the line>\n<caret>\n", like Metal's compiler. */
static id compile_error(const char *source, const char *token, const char *text)
{
    const char *at = strstr(source, token);
    const char *line = source;
    const char *p;
    const char *eol;
    int row = 1;
    char message[1024];

    if (!at)
        at = source;
    for (p = source; p < at; p++)
        if (*p == '\n') {
            row++;
            line = p + 1;
        }
    eol = strchr(at, '\n');
    if (!eol)
        eol = at + strlen(at);
    snprintf(message, sizeof message, "program_source:%d:%d: error: %s\n%.*s\n%*s^\n",
             row, (int)(at - line) + 1, text, (int)(eol - line), line, (int)(at - line), "");
    return fake_error(message, 3);   /* MTLLibraryErrorCompileFailure */
}

@interface FakeMTLLibrary : FakeMTLObject
{
@public
    char *source;
    int cap;
}
- (id)newFunctionWithName:(id)name;
- (id)newFunctionWithName:(id)name constantValues:(id)values error:(id *)error;
@end

@interface FakeMTLFunction : FakeMTLObject
{
@public
    int cap;
    int fn;
    int bias;       /* function constant 0 */
    id name;
}
- (id)name;
@end

@interface FakeMTLComputePipelineState : FakeMTLObject
{
@public
    int cap;
    int fn;
    int bias;
}
- (unsigned long)threadExecutionWidth;
- (unsigned long)maxTotalThreadsPerThreadgroup;
@end

@interface FakeMTLBuffer : FakeMTLObject
{
@public
    unsigned char *bytes;
    unsigned long length;
}
- (void *)contents;
- (unsigned long)length;
@end

@interface FakeMTLComputeCommandEncoder : FakeMTLObject
{
@public
    id command_buffer;
    FakeMTLComputePipelineState *pipeline;
    FakeMTLBuffer *buffers[4];
    int dispatched;
    FakeMTLSize groups, threads;
}
- (void)setComputePipelineState:(id)pipeline;
- (void)setBuffer:(id)buffer offset:(unsigned long)offset atIndex:(unsigned long)index;
- (void)dispatchThreadgroups:(FakeMTLSize)groups threadsPerThreadgroup:(FakeMTLSize)threads;
- (void)endEncoding;
@end

@interface FakeMTLCommandBuffer : FakeMTLObject
{
@public
    FakeMTLComputeCommandEncoder *encoder;
    int committed;
    int stuck;
    int errored;    /* an MTLCommandBufferError code: status Error */
    int polls;
}
- (id)computeCommandEncoder;
- (void)commit;
- (unsigned long)status;
- (id)error;
@end

@interface FakeMTLCommandQueue : FakeMTLObject
- (id)commandBuffer;
@end

@implementation NSString
+ (id)stringWithUTF8String:(const char *)text
{
    NSString *s = [self new];
    s->utf8 = strdup(text ? text : "");
    return s;
}
- (const char *)UTF8String
{
    return utf8;
}
@end

@implementation NSError
- (id)localizedDescription
{
    return description;
}
- (long)code
{
    return code;
}
@end

@implementation MTLCompileOptions
- (void)setLanguageVersion:(unsigned long)version
{
    languageVersion = version;
}
- (unsigned long)languageVersion
{
    return languageVersion;
}
@end

static int source_cap(const char *source)
{
    int i;
    for (i = 0; i < CAP_COUNT; i++)
        if (strstr(source, cap_functions[i]))
            return i;
    return CAP_NONE;
}

static id fake_new_library(id source, id options, id *error)
{
    const char *text = source ? [(NSString *)source UTF8String] : NULL;
    unsigned long version = options ? ((MTLCompileOptions *)options)->languageVersion : 0;
    FakeMTLLibrary *library;
    int cap;

    if (error)
        *error = nil;
    if (!text) {
        if (error)
            *error = fake_error("source is nil", 1);
        return nil;
    }
    cap = source_cap(text);
    switch (kernel_mode(cap)) {
    case MODE_HANG:
        for (;;)
            sleep(1);
    case MODE_COMPILE_ERROR:
        if (error && getenv("CAPSCAN_FAKE_METAL_COMPILE_ERROR"))
            *error = fake_error(getenv("CAPSCAN_FAKE_METAL_COMPILE_ERROR"), 3);
        else if (error)
            *error = cap == CAP_REDUCTION ? compile_error(text, "simd_sum(v)", "use of undeclared identifier 'simd_sum'")
                   : cap == CAP_MM ? compile_error(text, "simdgroup_float8x8 fa", "unknown type name 'simdgroup_float8x8'")
                   : compile_error(text, "bfloat b", "unknown type name 'bfloat'");
        return nil;
    default:
        break;
    }
    /* bfloat arrived with MSL 3.1 (MTLLanguageVersion3_1 = 0x30001). */
    if (strstr(text, "bfloat b") && version < 0x30001) {
        if (error)
            *error = compile_error(text, "#error", "\"bfloat needs Metal Shading Language 3.1\"");
        return nil;
    }
    library = [FakeMTLLibrary new];
    library->source = strdup(text);
    library->cap = cap;
    return library;
}

@implementation FakeMTLLibrary
- (id)newFunctionWithName:(id)name
{
    const char *wanted = name ? [(NSString *)name UTF8String] : "";
    char pattern[256];
    FakeMTLFunction *f;

    snprintf(pattern, sizeof pattern, "kernel void %s(", wanted);
    if (!strstr(source, pattern))
        return nil;
    f = [FakeMTLFunction new];
    f->cap = cap;
    f->fn = FN_NONE;
    for (int i = 0; i < FN_COUNT; i++)
        if (strcmp(fn_names[i], wanted) == 0)
            f->fn = i;
    f->bias = 0;
    f->name = name;
    return f;
}
/* Like Metal: a function that declares a function constant needs a value for it. */
- (id)newFunctionWithName:(id)name constantValues:(id)values error:(id *)error
{
    FakeMTLFunction *f = [self newFunctionWithName:name];
    MTLFunctionConstantValues *v = values;

    if (error)
        *error = nil;
    if (f && strstr(source, "[[function_constant(0)]]") && !(v && v->set[0])) {
        if (error)
            *error = fake_error("Function capscan_simdgroup_mm_fa has a function constant at index 0 without a value", 2);
        return nil;
    }
    if (f && v && v->set[0])
        f->bias = v->value[0] != 0;
    return f;
}
@end

@implementation MTLFunctionConstantValues
- (void)setConstantValue:(const void *)bytes type:(unsigned long)type atIndex:(unsigned long)index
{
    if (type == 53 && index < 4 && bytes) {
        set[index] = 1;
        value[index] = *(const unsigned char *)bytes;
    }
}
@end

@implementation FakeMTLFunction
- (id)name
{
    return name;
}
@end

static id fake_new_pipeline(id function, id *error)
{
    FakeMTLComputePipelineState *p;
    if (error)
        *error = nil;
    if (!function) {
        if (error)
            *error = fake_error("function is nil", 1);
        return nil;
    }
    p = [FakeMTLComputePipelineState new];
    p->cap = ((FakeMTLFunction *)function)->cap;
    p->fn = ((FakeMTLFunction *)function)->fn;
    p->bias = ((FakeMTLFunction *)function)->bias;
    return p;
}

@implementation FakeMTLComputePipelineState
- (unsigned long)threadExecutionWidth
{
    return 32;
}
- (unsigned long)maxTotalThreadsPerThreadgroup
{
    return 1024;
}
@end

static id fake_new_buffer(const void *bytes, unsigned long length, unsigned long options)
{
    FakeMTLBuffer *b = [FakeMTLBuffer new];
    (void)options;
    b->bytes = calloc(1, length ? length : 1);
    b->length = length;
    if (bytes)
        memcpy(b->bytes, bytes, length);
    return b;
}

@implementation FakeMTLBuffer
- (void *)contents
{
    return bytes;
}
- (unsigned long)length
{
    return length;
}
@end

/* float -> bfloat -> float, round to nearest even (NaN kept quiet). */
static float bfloat_round_trip(float x)
{
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u)
        bits |= 0x00400000u;
    else
        bits += 0x7fffu + ((bits >> 16) & 1u);
    bits &= 0xffff0000u;
    memcpy(&x, &bits, sizeof x);
    return x;
}

static float *floats(FakeMTLBuffer *b, unsigned long count)
{
    return b && b->length >= count * sizeof(float) ? (float *)b->bytes : NULL;
}

/* IEEE half bits -> float (normals, zero and subnormals; no inf/NaN in the probe's inputs). */
static float half_to_float(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float v = e == 0 ? (float)m / 1024.0f / 16384.0f : (1.0f + (float)m / 1024.0f) * ((e >= 15) ? (float)(1 << (e - 15)) : 1.0f / (float)(1 << (15 - e)));
    return (h & 0x8000) ? -v : v;
}

/* D = A*B + C over 8x8 row-major floats (the mm and bfloat_mm kernels). */
static void mm8(const float *src, float *dst)
{
    unsigned long t, k;
    for (t = 0; t < 64; t++) {
        float d = src[128 + t];
        for (k = 0; k < 8; k++)
            d += src[(t / 8) * 8 + k] * src[64 + k * 8 + t % 8];
        dst[t] = d;
    }
}

/* What the GPU would compute for the probe's kernels (src/kernels/\*.metal). */
static void run_on_cpu(FakeMTLComputeCommandEncoder *e)
{
    int cap = e->pipeline ? e->pipeline->cap : CAP_NONE;
    int fn = e->pipeline ? e->pipeline->fn : FN_NONE;
    int fail = fn_mode(fn) == MODE_FAIL;
    unsigned long per_group = e->threads.width * e->threads.height * e->threads.depth;
    unsigned long t, k;

    if (!e->dispatched || per_group == 0 || per_group > 1024)
        return;
    if (cap == CAP_REDUCTION) {
        /* each threadgroup writes dst[tiitg] and dst[32 + tiitg] (threads <= 32 here) */
        float *src = floats(e->buffers[0], per_group < 32 ? per_group : 32);
        float *dst = floats(e->buffers[1], 64);
        float sum = 0, max;
        unsigned long lanes = per_group < 32 ? per_group : 32;
        if (!src || !dst)
            return;
        max = src[0];
        for (t = 0; t < lanes; t++) {
            sum += src[t];
            if (src[t] > max)
                max = src[t];
        }
        for (t = 0; t < lanes; t++) {
            dst[t] = sum;
            dst[32 + t] = max;
        }
        if (fail && lanes > 3)
            dst[3] = 0;
    } else if (fn == FN_MM) {
        float *src = floats(e->buffers[0], 192);
        float *dst = floats(e->buffers[1], 128);
        if (!src || !dst || per_group < 32)
            return;   /* simdgroup matrices need a whole SIMD group */
        mm8(src, dst);
        for (t = 0; t < 64; t++)
            dst[64 + t] = dst[t];   /* small integers: exact in half too */
        if (fail)
            dst[9] += 1;
    } else if (fn == FN_MM_FA) {
        /* S = Q * K^T (+ C when function constant 0 is true), one 8-column block per SIMD
         * group: four groups need 128 threads, fewer leave blocks unwritten. */
        const uint16_t *q = e->buffers[0] && e->buffers[0]->length >= 640 + 1024 ? (const uint16_t *)e->buffers[0]->bytes : NULL;
        const float *c = q ? (const float *)(e->buffers[0]->bytes + 640) : NULL;
        float *dst = floats(e->buffers[1], 256);
        unsigned long groups = per_group / 32 < 4 ? per_group / 32 : 4, j, col, d;
        (void)k;
        if (!q || !dst)
            return;
        for (j = 0; j < 8; j++)
            for (col = 0; col < 8 * groups; col++) {
                float s = e->pipeline->bias ? c[j * 32 + col] : 0.0f;
                for (d = 0; d < 8; d++)
                    s += half_to_float(q[j * 8 + d]) * half_to_float(q[64 + col * 8 + d]);
                dst[j * 32 + col] = s;
            }
        if (fail)
            dst[9] += 1;
    } else if (fn == FN_BFLOAT_MM) {
        float *src = floats(e->buffers[0], 192);
        float *dst = floats(e->buffers[1], 64);
        if (!src || !dst || per_group < 32)
            return;
        mm8(src, dst);   /* small integers: exact in bfloat */
        if (fail)
            dst[9] += 1;
    } else if (cap == CAP_BFLOAT) {
        unsigned long lanes = per_group < 32 ? per_group : 32;
        float *src = floats(e->buffers[0], lanes);
        float *dst = floats(e->buffers[1], lanes);
        if (!src || !dst)
            return;
        for (t = 0; t < lanes; t++)
            dst[t] = fail ? src[t] : bfloat_round_trip(src[t]);
    }
}

@implementation FakeMTLComputeCommandEncoder
- (void)setComputePipelineState:(id)p
{
    pipeline = p;
}
- (void)setBuffer:(id)buffer offset:(unsigned long)offset atIndex:(unsigned long)index
{
    (void)offset;
    if (index < 4)
        buffers[index] = buffer;
}
- (void)dispatchThreadgroups:(FakeMTLSize)g threadsPerThreadgroup:(FakeMTLSize)t
{
    if (fn_mode(pipeline ? pipeline->fn : FN_NONE) == MODE_CRASH) {
        static const char note[] = "libfakemetal: simulated fault in dispatchThreadgroups:threadsPerThreadgroup:\n";
        if (write(2, note, sizeof note - 1) < 0)
            abort();
        signal(SIGSEGV, SIG_DFL);   /* a real fault, whatever handlers are installed */
        raise(SIGSEGV);
    }
    groups = g;
    threads = t;
    dispatched = 1;
}
- (void)endEncoding
{
}
@end

@implementation FakeMTLCommandBuffer
- (id)computeCommandEncoder
{
    encoder = [FakeMTLComputeCommandEncoder new];
    encoder->command_buffer = self;
    return encoder;
}
- (void)commit
{
    committed = 1;
    if (encoder && fn_mode(encoder->pipeline ? encoder->pipeline->fn : FN_NONE) == MODE_TIMEOUT) {
        stuck = 1;
        return;
    }
    if (encoder && fn_mode(encoder->pipeline ? encoder->pipeline->fn : FN_NONE) == MODE_GPU_TIMEOUT) {
        errored = 2;   /* MTLCommandBufferErrorTimeout */
        return;
    }
    if (encoder)
        run_on_cpu(encoder);
}
/* MTLCommandBufferStatus: 0 NotEnqueued, 2 Committed, 3 Scheduled, 4 Completed. */
- (unsigned long)status
{
    if (!committed)
        return 0;
    if (stuck)
        return 2;
    if (errored)
        return polls++ == 0 ? 3 : 5;   /* MTLCommandBufferStatusError */
    return polls++ == 0 ? 3 : 4;
}
- (id)error
{
    return errored ? fake_error("Caused GPU Timeout Error (00000002:kIOGPUCommandBufferCallbackErrorTimeout)",
                                errored) : nil;
}
@end

@implementation FakeMTLCommandQueue
- (id)commandBuffer
{
    return [FakeMTLCommandBuffer new];
}
@end

/* ------------------------------------------------------------ sysctlbyname */

static int sysctl_answer(const void *value, size_t size, void *oldp, size_t *oldlenp)
{
    if (!oldlenp) {
        errno = EINVAL;
        return -1;
    }
    if (!oldp) {
        *oldlenp = size;
        return 0;
    }
    if (*oldlenp < size) {
        errno = ENOMEM;
        return -1;
    }
    memcpy(oldp, value, size);
    *oldlenp = size;
    return 0;
}

int sysctlbyname(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
{
    const char *value;

    (void)newp;
    (void)newlen;
    if (strcmp(name, "machdep.cpu.brand_string") == 0 || strcmp(name, "kern.osproductversion") == 0) {
        int brand = name[0] == 'm';
        value = getenv(brand ? "CAPSCAN_FAKE_CPU_BRAND" : "CAPSCAN_FAKE_OS_VERSION");
        if (!value)
            value = brand ? "Apple M1 Ultra (Virtual)" : "15.5";
        if (*value)
            return sysctl_answer(value, strlen(value) + 1, oldp, oldlenp);
    } else if (strcmp(name, "kern.hv_vmm_present") == 0) {
        value = getenv("CAPSCAN_FAKE_HV_VMM_PRESENT");
        if (!value || *value) {
            int present = value ? atoi(value) : 1;
            return sysctl_answer(&present, sizeof present, oldp, oldlenp);
        }
    }
    errno = ENOENT;
    return -1;
}

@implementation _MTLDevice
- (void)initGPUFamilySupport
{
    family_support_initialised = 1;
}
- (id)name
{
    return [FakeMTLString stringWithUTF8:((const struct profile *)profile)->name];
}
- (BOOL)supportsFamily:(long)family
{
    const long *f;
    for (f = ((const struct profile *)profile)->families; *f; f++)
        if (*f == family)
            return YES;
    return NO;
}
- (unsigned long)maxThreadgroupMemoryLength
{
    return ((const struct profile *)profile)->tg_memory;
}
- (unsigned long long)recommendedMaxWorkingSetSize
{
    return ((const struct profile *)profile)->working_set;
}
- (BOOL)hasUnifiedMemory
{
    return ((const struct profile *)profile)->unified;
}
- (unsigned long long)registryID
{
    return 4242;
}
- (id)newLibraryWithSource:(id)source options:(id)options error:(id *)error
{
    return fake_new_library(source, options, error);
}
- (id)newComputePipelineStateWithFunction:(id)function error:(id *)error
{
    return fake_new_pipeline(function, error);
}
- (id)newCommandQueue
{
    return [FakeMTLCommandQueue new];
}
- (id)newBufferWithBytes:(const void *)bytes length:(unsigned long)length options:(unsigned long)options
{
    return fake_new_buffer(bytes, length, options);
}
@end

/* Concrete classes: everything inherited from the base. */
@interface FakeMTLParavirtualDevice : _MTLDevice
@end
@implementation FakeMTLParavirtualDevice
@end

@interface FakeMTLHostDevice : _MTLDevice
@end
@implementation FakeMTLHostDevice
@end

/* A device class with no maxThreadgroupMemoryLength at all. */
@interface FakeMTLIncompleteDevice : FakeMTLObject
{
@public
    const void *profile;
}
- (id)name;
- (BOOL)supportsFamily:(long)family;
- (unsigned long long)recommendedMaxWorkingSetSize;
- (BOOL)hasUnifiedMemory;
@end
@implementation FakeMTLIncompleteDevice
- (id)name
{
    return [FakeMTLString stringWithUTF8:((const struct profile *)profile)->name];
}
- (BOOL)supportsFamily:(long)family
{
    const long *f;
    for (f = ((const struct profile *)profile)->families; *f; f++)
        if (*f == family)
            return YES;
    return NO;
}
- (unsigned long long)recommendedMaxWorkingSetSize
{
    return ((const struct profile *)profile)->working_set;
}
- (BOOL)hasUnifiedMemory
{
    return ((const struct profile *)profile)->unified;
}
@end

static int profile_has(const void *profile, long family)
{
    const long *f;
    for (f = ((const struct profile *)profile)->families; *f; f++)
        if (*f == family)
            return 1;
    return 0;
}

static id make_device_of_kind(void);

static id make_device(void)
{
    if (forked_without_exec) {
        static const char note[] = "libfakemetal: Metal used in a forked child without exec\n";
        if (write(2, note, sizeof note - 1) < 0)
            _exit(134);
        signal(SIGABRT, SIG_DFL);
        abort();
    }
    last_device = make_device_of_kind();
    return last_device;
}

static id make_device_of_kind(void)
{
    const char *kind = getenv("CAPSCAN_FAKE_METAL_DEVICE");
    _MTLDevice *device;

    if (!kind || !*kind || strcmp(kind, "paravirtual") == 0) {
        device = [FakeMTLParavirtualDevice new];
        device->profile = &paravirtual;
    } else if (strcmp(kind, "paravirtual-no-init") == 0) {
        device = [FakeMTLParavirtualDevice new];
        device->profile = &paravirtual;
        return device;
    } else if (strcmp(kind, "m1-ultra") == 0) {
        device = [FakeMTLHostDevice new];
        device->profile = &m1_ultra;
    } else if (strcmp(kind, "incomplete") == 0) {
        FakeMTLIncompleteDevice *odd = [FakeMTLIncompleteDevice new];
        odd->profile = &paravirtual;
        return odd;
    } else {
        return nil;   /* "none", or anything unknown */
    }
    [device initGPUFamilySupport];   /* as Metal does while creating a device */
    return device;
}

id FakeMTLCreateDeviceInternally(void)
{
    return make_device();
}

id MTLCreateSystemDefaultDevice(void)
{
    return make_device();
}

id MTLCopyAllDevices(void)
{
    FakeMTLArray *all = [FakeMTLArray new];
    id device = make_device();
    if (device)
        all->items[all->n++] = device;
    return all;
}
