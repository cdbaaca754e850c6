/* capscan-probe's host-proof values (sysctl) and its --kernels checks: compile
 * one small Metal library per capability llama.cpp gates on, run it, compare
 * the numbers with a CPU reference.
 *
 * The checks run in a fresh process: fork, then at once execv of the probe
 * itself (`capscan-probe --kernel-check MS`), never Metal in a forked copy (a
 * process that links Metal, CoreGraphics and Foundation is not fork-safe on
 * macOS even before it touches them).  The child reports over its stdout:
 *   "B <i>\n"                     check i started
 *   "R <i> <result> <message>\n"  check i finished (message cleaned, may be empty)
 * The parent waits until a deadline, kills the child past it, and turns a
 * missing result into timeout (deadline) or crash (the child died by a signal
 * or exited non-zero): both mean the check could not run, never wrong numbers.
 *
 * Kernel sources: src/kernels/<capability>.metal, embedded at build time as
 * C strings (build/gen/probe_msl.h).  Message sends go through
 * class_getMethodImplementation with each method's real C type, as in
 * objc_call.c; every selector is checked with capscan_responds first. */
#include "capscan/probe_kernels.h"
#include "capscan/objc_call.h"
#include "capscan/probe_sys.h"
#include "capscan/textbuf.h"
#include "probe_msl.h"

extern id MTLCreateSystemDefaultDevice(void);

const char *const capscan_kernel_names[CAPSCAN_KERNEL_COUNT] = {
    "simdgroup_reduction", "simdgroup_mm", "bfloat"
};

/* MTLLanguageVersion values: (major << 16) | minor. */
#define MSL_2_3 ((2ul << 16) | 3ul)
#define MSL_3_1 ((3ul << 16) | 1ul)

static const struct {
    const char *source;
    unsigned long language_version;
} kernels[CAPSCAN_KERNEL_COUNT] = {
    {capscan_msl_simdgroup_reduction, MSL_2_3},
    {capscan_msl_simdgroup_mm, MSL_2_3},
    {capscan_msl_bfloat, MSL_3_1},
};

#define MTL_STATUS_COMPLETED 4   /* MTLCommandBufferStatusCompleted */
#define MTL_STATUS_ERROR 5       /* MTLCommandBufferStatusError */
#define MTL_STORAGE_SHARED 0ul   /* MTLResourceStorageModeShared << MTLResourceStorageModeShift */
#define MTL_DATA_TYPE_BOOL 53ul  /* MTLDataTypeBool */
#define MTL_COMMAND_BUFFER_ERROR_TIMEOUT 2ul   /* MTLCommandBufferErrorTimeout */

struct mtl_size {                /* MTLSize, passed by value */
    unsigned long width, height, depth;
};

const char *capscan_kernel_result_name(int result)
{
    switch (result) {
    case CAPSCAN_KERNEL_PASS: return "pass";
    case CAPSCAN_KERNEL_FAIL: return "fail";
    case CAPSCAN_KERNEL_COMPILE_ERROR: return "compile-error";
    case CAPSCAN_KERNEL_TIMEOUT: return "timeout";
    case CAPSCAN_KERNEL_CRASH: return "crash";
    default: return "not-run";
    }
}

/* ------------------------------------------------------------------ small helpers */

static unsigned long long now_ms(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return 0;
    return (unsigned long long)ts.tv_sec * 1000ull + (unsigned long long)ts.tv_nsec / 1000000ull;
}

static void copy_text(char *dst, unsigned long size, const char *src)
{
    unsigned long i = 0;
    while (src && src[i] && i + 1 < size) {
        dst[i] = src[i];
        i++;
    }
    if (size)
        dst[i] = '\0';
}

/* Messages: ASCII only, runs of whitespace and control characters become one
 * space, other bytes outside printable ASCII become '?', no leading or
 * trailing space, at most CAPSCAN_KERNEL_MESSAGE_MAX bytes. */
static void clean_message(char *dst, const char *src)
{
    unsigned long n = 0;
    int space = 0;

    for (; src && *src && n < CAPSCAN_KERNEL_MESSAGE_MAX; src++) {
        unsigned char c = (unsigned char)*src;
        if (c <= 0x20 || c == 0x7f) {
            space = n > 0;
            continue;
        }
        if (space) {
            if (n + 1 >= CAPSCAN_KERNEL_MESSAGE_MAX)
                break;
            dst[n++] = ' ';
            space = 0;
        }
        dst[n++] = c < 0x80 ? (char)c : '?';
    }
    dst[n] = '\0';
}

/* Numbers in messages: integers as integers, others with up to 6 decimals,
 * large and tiny magnitudes as d.dddddde[+-]NN.  Only signed conversions (no
 * compiler-rt in the SDK-less build). */
static void buf_num(struct capscan_buf *b, double v)
{
    long long whole;
    double frac;
    int digits, exp10 = 0;

    if (v != v) {
        capscan_buf_str(b, "nan");
        return;
    }
    if (v < 0) {
        capscan_buf_char(b, '-');
        v = -v;
    }
    if (v > 1.7e308) {
        capscan_buf_str(b, "inf");
        return;
    }
    if (v != 0 && (v >= 1e15 || v < 1e-4)) {
        while (v >= 10) {
            v /= 10;
            exp10++;
        }
        while (v < 1) {
            v *= 10;
            exp10--;
        }
    }
    whole = (long long)v;
    frac = v - (double)whole;
    capscan_buf_uint(b, (unsigned long long)whole);
    if (frac > 0) {
        long long scaled = (long long)(frac * 1e6 + 0.5);
        char d[6];
        if (scaled >= 1000000)
            scaled = 999999;
        for (digits = 5; digits >= 0; digits--) {
            d[digits] = (char)('0' + scaled % 10);
            scaled /= 10;
        }
        for (digits = 6; digits > 0 && d[digits - 1] == '0'; digits--)
            ;
        if (digits) {
            int i;
            capscan_buf_char(b, '.');
            for (i = 0; i < digits; i++)
                capscan_buf_char(b, d[i]);
        }
    }
    if (exp10) {
        capscan_buf_str(b, exp10 < 0 ? "e-" : "e+");
        capscan_buf_uint(b, (unsigned long long)(exp10 < 0 ? -exp10 : exp10));
    }
}

/* ------------------------------------------------------------------ host-proof values */

static int sysctl_text(const char *name, char *dst, unsigned long size)
{
    size_t len = size - 1;

    dst[0] = '\0';
    if (sysctlbyname(name, dst, &len, 0, 0) != 0) {
        dst[0] = '\0';
        return -1;
    }
    dst[len < size ? len : size - 1] = '\0';
    return 0;
}

void capscan_host_query(struct capscan_host *host)
{
    int value = 0;
    size_t len = sizeof value;

    sysctl_text("machdep.cpu.brand_string", host->cpu_brand, sizeof host->cpu_brand);
    sysctl_text("kern.osproductversion", host->os_version, sizeof host->os_version);
    host->hv_vmm_present = -1;
    if (sysctlbyname("kern.hv_vmm_present", &value, &len, 0, 0) == 0 && len == sizeof value)
        host->hv_vmm_present = value != 0;
#if defined(__aarch64__) || defined(__arm64__)
    host->arch = "arm64";
#elif defined(__x86_64__)
    host->arch = "x86_64";
#else
    host->arch = "unknown";
#endif
#if defined(__linux__)
    /* The Linux stand-in only: tests play an arm64 guest on an x86_64 CI machine. The macOS
     * build never reads this (its slice is the architecture). */
    if (getenv("CAPSCAN_FAKE_ARCH") && *getenv("CAPSCAN_FAKE_ARCH"))
        host->arch = getenv("CAPSCAN_FAKE_ARCH");
#endif
}

/* macOS major version -> highest Metal Shading Language its compiler takes. */
static int os_major(const char *version)
{
    int major = 0, digits = 0;
    while (*version >= '0' && *version <= '9' && digits < 4) {
        major = major * 10 + (*version++ - '0');
        digits++;
    }
    return digits ? major : -1;
}

static const char *msl_for_os(int major)
{
    if (major >= 26) return "4.0";
    if (major >= 15) return "3.2";
    if (major == 14) return "3.1";
    if (major == 13) return "3.0";
    if (major == 12) return "2.4";
    if (major == 11) return "2.3";
    return "";
}

unsigned long capscan_kernel_timeout_ms(const char *value)
{
    unsigned long n = 0;
    int digits = 0;

    if (!value || !*value)
        return CAPSCAN_KERNEL_TIMEOUT_DEFAULT_MS;
    for (; *value; value++) {
        if (*value < '0' || *value > '9' || ++digits > 6)
            return CAPSCAN_KERNEL_TIMEOUT_DEFAULT_MS;
        n = n * 10 + (unsigned long)(*value - '0');
    }
    return n >= 1 && n <= 600000 ? n : CAPSCAN_KERNEL_TIMEOUT_DEFAULT_MS;
}

/* ------------------------------------------------------------------ typed sends */

static IMP imp_of(id object, const char *selector, SEL *sel)
{
    *sel = sel_registerName(selector);
    return class_getMethodImplementation(object_getClass(object), *sel);
}

static id send_id_cstr(id o, const char *s, const char *arg)
{
    typedef id (*fn)(id, SEL, const char *);
    SEL sel;
    IMP imp = imp_of(o, s, &sel);
    return CAPSCAN_CALLABLE(fn, imp)(o, sel, arg);
}

static id send_id_id(id o, const char *s, id arg)
{
    typedef id (*fn)(id, SEL, id);
    SEL sel;
    IMP imp = imp_of(o, s, &sel);
    return CAPSCAN_CALLABLE(fn, imp)(o, sel, arg);
}

static id send_id_id_err(id o, const char *s, id arg, id *error)
{
    typedef id (*fn)(id, SEL, id, id *);
    SEL sel;
    IMP imp = imp_of(o, s, &sel);
    return CAPSCAN_CALLABLE(fn, imp)(o, sel, arg, error);
}

static id send_id_id_id_err(id o, const char *s, id a, id b, id *error)
{
    typedef id (*fn)(id, SEL, id, id, id *);
    SEL sel;
    IMP imp = imp_of(o, s, &sel);
    return CAPSCAN_CALLABLE(fn, imp)(o, sel, a, b, error);
}

static id send_new_buffer(id o, const void *bytes, unsigned long length, unsigned long options)
{
    typedef id (*fn)(id, SEL, const void *, unsigned long, unsigned long);
    SEL sel;
    IMP imp = imp_of(o, "newBufferWithBytes:length:options:", &sel);
    return CAPSCAN_CALLABLE(fn, imp)(o, sel, bytes, length, options);
}

static void send_void(id o, const char *s)
{
    typedef void (*fn)(id, SEL);
    SEL sel;
    IMP imp = imp_of(o, s, &sel);
    CAPSCAN_CALLABLE(fn, imp)(o, sel);
}

static void send_void_ulong(id o, const char *s, unsigned long arg)
{
    typedef void (*fn)(id, SEL, unsigned long);
    SEL sel;
    IMP imp = imp_of(o, s, &sel);
    CAPSCAN_CALLABLE(fn, imp)(o, sel, arg);
}

static void send_void_id(id o, const char *s, id arg)
{
    typedef void (*fn)(id, SEL, id);
    SEL sel;
    IMP imp = imp_of(o, s, &sel);
    CAPSCAN_CALLABLE(fn, imp)(o, sel, arg);
}

static void send_set_buffer(id o, id buffer, unsigned long offset, unsigned long index)
{
    typedef void (*fn)(id, SEL, id, unsigned long, unsigned long);
    SEL sel;
    IMP imp = imp_of(o, "setBuffer:offset:atIndex:", &sel);
    CAPSCAN_CALLABLE(fn, imp)(o, sel, buffer, offset, index);
}

static void send_dispatch(id o, struct mtl_size groups, struct mtl_size threads)
{
    typedef void (*fn)(id, SEL, struct mtl_size, struct mtl_size);
    SEL sel;
    IMP imp = imp_of(o, "dispatchThreadgroups:threadsPerThreadgroup:", &sel);
    CAPSCAN_CALLABLE(fn, imp)(o, sel, groups, threads);
}

static void *send_ptr(id o, const char *s)
{
    typedef void *(*fn)(id, SEL);
    SEL sel;
    IMP imp = imp_of(o, s, &sel);
    return CAPSCAN_CALLABLE(fn, imp)(o, sel);
}

/* ------------------------------------------------------------------ inputs and CPU references */

#define LANES 32

struct run {
    union {
        float f[512];
        unsigned short h[1024];   /* IEEE half bits (capscan_simdgroup_mm_fa) */
    } in;
    unsigned long in_len;     /* bytes */
    unsigned long out_len;    /* bytes */
    const float *out;
};

static void fill_reduction(struct run *r)
{
    int i;
    for (i = 0; i < LANES; i++)
        r->in.f[i] = (float)((i * 13) % 32);   /* permutation of 0..31 */
    r->in_len = LANES * sizeof(float);
    r->out_len = 2 * LANES * sizeof(float);
}

static void mm_inputs(float *a, float *b, float *c)
{
    int i, j;
    for (i = 0; i < 8; i++)
        for (j = 0; j < 8; j++) {
            a[i * 8 + j] = (float)((i + 2 * j) % 5 - 2);       /* -2..2 */
            b[i * 8 + j] = (float)((3 * i + j) % 7 - 3);       /* -3..3 */
            c[i * 8 + j] = (float)((i * j) % 5 - 2);           /* -2..2 */
        }
}

static void fill_mm(struct run *r)
{
    mm_inputs(r->in.f, r->in.f + 64, r->in.f + 128);
    r->in_len = 3 * 64 * sizeof(float);
    r->out_len = 2 * 64 * sizeof(float);
}

/* Values that a float holds and bfloat must round: 1/3 (index 4) cannot be
 * held; 1e38 and 1e-30 are outside half's range, inside bfloat's. */
static const float bfloat_inputs[LANES] = {
    0.0f, 1.0f, -1.0f, 0.5f, 1.0f / 3.0f, 3.14159265f, -2.71828183f, 1000.5f,
    65504.0f, 0.001f, 1e38f, 1e-30f, 7.0f, 12345.678f, -0.15625f, 256.0f,
    -100.25f, 3.0f, 1.5e10f, -6.0e-5f, 42.0f, 0.1f, -7.75f, 2048.0f,
    33.33f, -1e20f, 0.2f, 99.0f, -0.0078125f, 5e-20f, 1234567.0f, -3.0f,
};
#define BFLOAT_UNREPRESENTABLE 4

static void fill_bfloat(struct run *r)
{
    int i;
    for (i = 0; i < LANES; i++)
        r->in.f[i] = bfloat_inputs[i];
    r->in_len = LANES * sizeof(float);
    r->out_len = LANES * sizeof(float);
}

static void mismatch(char *msg, const char *what, double expected, double got, int at, const char *tail)
{
    static char storage[CAPSCAN_KERNEL_MESSAGE_MAX + 1];
    struct capscan_buf b;

    capscan_buf_init(&b, storage, sizeof storage);
    capscan_buf_str(&b, what);
    capscan_buf_str(&b, "expected ");
    buf_num(&b, expected);
    capscan_buf_str(&b, " got ");
    buf_num(&b, got);
    capscan_buf_str(&b, " at ");
    capscan_buf_uint(&b, (unsigned long long)at);
    capscan_buf_str(&b, tail);
    clean_message(msg, storage);
}

static int check_reduction(const struct run *r, char *msg)
{
    float sum = 0, max = r->in.f[0];
    int i;

    for (i = 0; i < LANES; i++) {
        sum += r->in.f[i];
        if (r->in.f[i] > max)
            max = r->in.f[i];
    }
    for (i = 0; i < LANES; i++)
        if (r->out[i] != sum) {     /* exact: integer-valued floats */
            mismatch(msg, "simd_sum: ", sum, r->out[i], i, "");
            return CAPSCAN_KERNEL_FAIL;
        }
    for (i = 0; i < LANES; i++)
        if (r->out[LANES + i] != max) {
            mismatch(msg, "simd_max: ", max, r->out[LANES + i], i, "");
            return CAPSCAN_KERNEL_FAIL;
        }
    return CAPSCAN_KERNEL_PASS;
}

/* half: every value is an integer below 64 in magnitude, exact in half's
 * 11-bit significand, so a correct unit is exact; 0.125 only admits a
 * conversion's rounding, not a wrong product. */
#define HALF_TOLERANCE 0.125

/* The CPU's C + A * B of mm_inputs, in float, summed in k order as each check compares it. */
static void mm_reference(float d[64])
{
    float a[64], b[64], c[64];
    int i, j, k;

    mm_inputs(a, b, c);
    for (i = 0; i < 8; i++)
        for (j = 0; j < 8; j++) {
            d[i * 8 + j] = c[i * 8 + j];
            for (k = 0; k < 8; k++)
                d[i * 8 + j] += a[i * 8 + k] * b[k * 8 + j];
        }
}

static int check_mm(const struct run *r, char *msg)
{
    float d[64];
    double diff;
    int i;

    mm_reference(d);
    for (i = 0; i < 64; i++) {
        if (r->out[i] != d[i]) {
            mismatch(msg, "simdgroup_float8x8: ", d[i], r->out[i], i, "");
            return CAPSCAN_KERNEL_FAIL;
        }
        diff = (double)r->out[64 + i] - d[i];
        if (!(diff <= HALF_TOLERANCE && diff >= -HALF_TOLERANCE)) {
            mismatch(msg, "simdgroup_half8x8: ", d[i], r->out[64 + i], i, " (tolerance 0.125)");
            return CAPSCAN_KERNEL_FAIL;
        }
    }
    return CAPSCAN_KERNEL_PASS;
}

/* bfloat: 8 significand bits.  Round to nearest is within |x| * 2^-8; the
 * check allows |x| * 2^-7 so a truncating conversion passes too.  1/3 must
 * come back changed: a float passed through untouched is not a bfloat. */
static int check_bfloat(const struct run *r, char *msg)
{
    int i;

    for (i = 0; i < LANES; i++) {
        double x = r->in.f[i], got = r->out[i];
        double tol = (x < 0 ? -x : x) / 128.0;
        double diff = got - x;
        if (!(diff <= tol && diff >= -tol)) {
            mismatch(msg, "", x, got, i, " (tolerance |x|/128)");
            return CAPSCAN_KERNEL_FAIL;
        }
    }
    if (r->out[BFLOAT_UNREPRESENTABLE] == r->in.f[BFLOAT_UNREPRESENTABLE]) {
        static char storage[CAPSCAN_KERNEL_MESSAGE_MAX + 1];
        struct capscan_buf b;
        capscan_buf_init(&b, storage, sizeof storage);
        capscan_buf_str(&b, "got ");
        buf_num(&b, r->out[BFLOAT_UNREPRESENTABLE]);
        capscan_buf_str(&b, " at 4, its input exactly: 1/3 needs more than bfloat's 8 significand bits, "
                            "so the value was not stored as bfloat");
        clean_message(msg, storage);
        return CAPSCAN_KERNEL_FAIL;
    }
    return CAPSCAN_KERNEL_PASS;
}

/* capscan_simdgroup_mm_fa: Q (8x8), K (32 keys x 8), C (8x32), small integers. */
static int fa_q(int j, int d) { return (j + 2 * d) % 5 - 2; }
static int fa_k(int c, int d) { return (3 * c + d) % 7 - 3; }
static int fa_c(int j, int c) { return (j * c) % 5 - 2; }

/* IEEE half bits of a small integer (|v| < 2048: exact, no rounding). */
static unsigned short half_bits(int v)
{
    unsigned a = (unsigned)(v < 0 ? -v : v);
    unsigned short sign = v < 0 ? 0x8000u : 0;
    int e = 0;

    if (a == 0)
        return sign;
    while ((a >> (e + 1)) != 0)
        e++;
    return (unsigned short)(sign | (unsigned)((e + 15) << 10) | ((a << (10 - e)) & 0x3ffu));
}

static void fill_fa(struct run *r)
{
    int j, c, d;
    float *bias = r->in.f + 160;   /* byte 640 */

    for (j = 0; j < 8; j++)
        for (d = 0; d < 8; d++)
            r->in.h[j * 8 + d] = half_bits(fa_q(j, d));
    for (c = 0; c < 32; c++)
        for (d = 0; d < 8; d++)
            r->in.h[64 + c * 8 + d] = half_bits(fa_k(c, d));
    for (c = 0; c < 256; c++)   /* one loop: clang turns a constant row into memset_pattern16 */
        bias[c] = (float)fa_c(c / 32, c % 32);
    r->in_len = 640 + 256 * sizeof(float);
    r->out_len = 256 * sizeof(float);
}

/* Exact: every product and sum is an integer below 64 in magnitude. */
static int check_fa(const struct run *r, char *msg)
{
    int j, c, d;

    for (j = 0; j < 8; j++)
        for (c = 0; c < 32; c++) {
            float s = (float)fa_c(j, c);
            for (d = 0; d < 8; d++)
                s += (float)(fa_q(j, d) * fa_k(c, d));
            if (r->out[j * 32 + c] != s) {
                mismatch(msg, "capscan_simdgroup_mm_fa (half x half -> float, K transposed from device memory, "
                              "128 threads, function constant): ", s, r->out[j * 32 + c], j * 32 + c, "");
                return CAPSCAN_KERNEL_FAIL;
            }
        }
    return CAPSCAN_KERNEL_PASS;
}

static void fill_bfloat_mm(struct run *r)
{
    fill_mm(r);
    r->out_len = 64 * sizeof(float);
}

/* Exact: the inputs are small integers, which bfloat holds exactly. */
static int check_bfloat_mm(const struct run *r, char *msg)
{
    float d[64];
    int i;

    mm_reference(d);
    for (i = 0; i < 64; i++)
        if (r->out[i] != d[i]) {
            mismatch(msg, "simdgroup_bfloat8x8: ", d[i], r->out[i], i, "");
            return CAPSCAN_KERNEL_FAIL;
        }
    return CAPSCAN_KERNEL_PASS;
}

/* Every kernel of a capability's library, in order; the capability's result is
 * the first that does not pass.  `constant` sets function constant 0 (bool) to
 * true before the function is made (newFunctionWithName:constantValues:error:). */
static const struct step {
    int cap;
    const char *function;
    unsigned long threads;
    int constant;
    void (*fill)(struct run *);
    int (*check)(const struct run *, char *);
} steps[] = {
    {CAPSCAN_KERNEL_REDUCTION, "capscan_simdgroup_reduction", 32, 0, fill_reduction, check_reduction},
    {CAPSCAN_KERNEL_MM, "capscan_simdgroup_mm", 32, 0, fill_mm, check_mm},
    {CAPSCAN_KERNEL_MM, "capscan_simdgroup_mm_fa", 128, 1, fill_fa, check_fa},
    {CAPSCAN_KERNEL_BFLOAT, "capscan_bfloat", 32, 0, fill_bfloat, check_bfloat},
    {CAPSCAN_KERNEL_BFLOAT, "capscan_bfloat_mm", 32, 0, fill_bfloat_mm, check_bfloat_mm},
};
#define STEP_COUNT (sizeof steps / sizeof steps[0])

/* ------------------------------------------------------------------ the child */

static void error_text(char *msg, const char *prefix, id error, const char *fallback)
{
    static char storage[1024];
    struct capscan_buf b;
    id text = error && capscan_responds(error, "localizedDescription")
                  ? capscan_send_id(error, "localizedDescription") : 0;
    const char *utf8 = text && capscan_responds(text, "UTF8String") ? capscan_send_cstr(text, "UTF8String") : 0;

    capscan_buf_init(&b, storage, sizeof storage);
    capscan_buf_str(&b, prefix);
    capscan_buf_str(&b, utf8 && *utf8 ? utf8 : fallback);
    clean_message(msg, storage);
}

static int missing(id object, const char *what, const char *selector, char *msg)
{
    static char storage[256];
    struct capscan_buf b;

    if (capscan_responds(object, selector))
        return 0;
    capscan_buf_init(&b, storage, sizeof storage);
    capscan_buf_str(&b, what);
    capscan_buf_str(&b, object ? " does not answer " : " is nil, needed for ");
    capscan_buf_str(&b, selector);
    clean_message(msg, storage);
    return 1;
}

struct child {
    id device;
    id queue;
    Class nsstring;
    Class options;
    Class constants;                /* MTLFunctionConstantValues */
    unsigned long long deadline;
};

static id nsstring(struct child *c, const char *text)
{
    return send_id_cstr((id)c->nsstring, "stringWithUTF8String:", text);
}

static id send_new_function_constants(id library, const char *function_name, struct child *c, id *error, char *msg)
{
    typedef void (*set_fn)(id, SEL, const void *, unsigned long, unsigned long);
    typedef id (*new_fn)(id, SEL, id, id, id *);
    static const unsigned char yes = 1;
    SEL sel;
    IMP imp;
    id values;

    if (missing((id)c->constants, "class MTLFunctionConstantValues", "new", msg) ||
        missing(library, "the library", "newFunctionWithName:constantValues:error:", msg))
        return 0;
    values = capscan_send_id((id)c->constants, "new");
    if (missing(values, "MTLFunctionConstantValues", "setConstantValue:type:atIndex:", msg))
        return 0;
    imp = imp_of(values, "setConstantValue:type:atIndex:", &sel);
    CAPSCAN_CALLABLE(set_fn, imp)(values, sel, &yes, MTL_DATA_TYPE_BOOL, 0);
    imp = imp_of(library, "newFunctionWithName:constantValues:error:", &sel);
    return CAPSCAN_CALLABLE(new_fn, imp)(library, sel, nsstring(c, function_name), values, error);
}

/* One kernel of the library: make it, run it on fixed inputs, compare. */
static int run_step(struct child *c, id library, const struct step *st, char *msg)
{
    struct run r;
    id function, pipeline, error = 0, in, out, cb, enc;
    unsigned long status;

    if (st->constant) {
        msg[0] = '\0';
        function = send_new_function_constants(library, st->function, c, &error, msg);
        if (!function && msg[0])
            return CAPSCAN_KERNEL_NOT_RUN;   /* the runtime lacks function constants: nothing ran */
        if (!function) {
            error_text(msg, "", error, "newFunctionWithName:constantValues:error: returned nil");
            return CAPSCAN_KERNEL_COMPILE_ERROR;
        }
    } else {
        if (missing(library, "the library", "newFunctionWithName:", msg))
            return CAPSCAN_KERNEL_NOT_RUN;
        function = send_id_id(library, "newFunctionWithName:", nsstring(c, st->function));
        if (!function) {
            error_text(msg, "the compiled library has no function ", 0, st->function);
            return CAPSCAN_KERNEL_COMPILE_ERROR;
        }
    }
    error = 0;
    pipeline = send_id_id_err(c->device, "newComputePipelineStateWithFunction:error:", function, &error);
    if (!pipeline) {
        error_text(msg, "pipeline: ", error, "newComputePipelineStateWithFunction:error: returned nil");
        return CAPSCAN_KERNEL_COMPILE_ERROR;
    }

    if (!c->queue)
        c->queue = capscan_send_id(c->device, "newCommandQueue");
    if (missing(c->queue, "newCommandQueue's result", "commandBuffer", msg))
        return CAPSCAN_KERNEL_NOT_RUN;

    st->fill(&r);
    {
        static const float zeros[256];
        in = send_new_buffer(c->device, r.in.f, r.in_len, MTL_STORAGE_SHARED);
        out = send_new_buffer(c->device, zeros, r.out_len, MTL_STORAGE_SHARED);
    }
    if (missing(in, "the input buffer", "contents", msg) || missing(out, "the output buffer", "contents", msg))
        return CAPSCAN_KERNEL_NOT_RUN;

    cb = capscan_send_id(c->queue, "commandBuffer");
    if (missing(cb, "the command buffer", "computeCommandEncoder", msg) ||
        missing(cb, "the command buffer", "commit", msg) || missing(cb, "the command buffer", "status", msg))
        return CAPSCAN_KERNEL_NOT_RUN;
    enc = capscan_send_id(cb, "computeCommandEncoder");
    if (missing(enc, "the encoder", "setComputePipelineState:", msg) ||
        missing(enc, "the encoder", "setBuffer:offset:atIndex:", msg) ||
        missing(enc, "the encoder", "dispatchThreadgroups:threadsPerThreadgroup:", msg) ||
        missing(enc, "the encoder", "endEncoding", msg))
        return CAPSCAN_KERNEL_NOT_RUN;
    send_void_id(enc, "setComputePipelineState:", pipeline);
    send_set_buffer(enc, in, 0, 0);
    send_set_buffer(enc, out, 0, 1);
    {
        struct mtl_size groups = {1, 1, 1}, threads = {st->threads, 1, 1};
        send_dispatch(enc, groups, threads);
    }
    send_void(enc, "endEncoding");
    send_void(cb, "commit");

    /* Poll instead of waitUntilCompleted, which could block forever. */
    for (;;) {
        status = capscan_send_ulong(cb, "status");
        if (status >= MTL_STATUS_COMPLETED)
            break;
        if (now_ms() >= c->deadline) {
            static char storage[128];
            struct capscan_buf b;
            capscan_buf_init(&b, storage, sizeof storage);
            capscan_buf_str(&b, "the command buffer did not complete before the deadline (status ");
            capscan_buf_uint(&b, status);
            capscan_buf_str(&b, ")");
            clean_message(msg, storage);
            return CAPSCAN_KERNEL_TIMEOUT;
        }
        usleep(1000);
    }
    if (status != MTL_STATUS_COMPLETED) {
        id cb_error = capscan_responds(cb, "error") ? capscan_send_id(cb, "error") : 0;
        int gpu_timeout = cb_error && capscan_responds(cb_error, "code") &&
                          capscan_send_ulong(cb_error, "code") == MTL_COMMAND_BUFFER_ERROR_TIMEOUT;
        error_text(msg, "command buffer error: ", cb_error, "status is not completed");
        /* The GPU's watchdog stopped it: the check did not finish, which is no wrong number. */
        return gpu_timeout ? CAPSCAN_KERNEL_TIMEOUT : CAPSCAN_KERNEL_FAIL;
    }
    r.out = (const float *)send_ptr(out, "contents");
    if (!r.out) {
        clean_message(msg, "the output buffer's contents is NULL");
        return CAPSCAN_KERNEL_FAIL;
    }
    return st->check(&r, msg);
}

static int run_kernel(struct child *c, int which, char *msg)
{
    static const char *const device_sels[] = {
        "newLibraryWithSource:options:error:", "newComputePipelineStateWithFunction:error:",
        "newCommandQueue", "newBufferWithBytes:length:options:"
    };
    id source, options, library, error = 0;
    unsigned i;

    for (i = 0; i < sizeof device_sels / sizeof device_sels[0]; i++)
        if (missing(c->device, "the Metal device", device_sels[i], msg))
            return CAPSCAN_KERNEL_NOT_RUN;
    if (missing((id)c->nsstring, "class NSString", "stringWithUTF8String:", msg) ||
        missing((id)c->options, "class MTLCompileOptions", "new", msg))
        return CAPSCAN_KERNEL_NOT_RUN;

    source = nsstring(c, kernels[which].source);
    options = capscan_send_id((id)c->options, "new");
    if (missing(options, "MTLCompileOptions", "setLanguageVersion:", msg))
        return CAPSCAN_KERNEL_NOT_RUN;
    send_void_ulong(options, "setLanguageVersion:", kernels[which].language_version);

    library = send_id_id_id_err(c->device, "newLibraryWithSource:options:error:", source, options, &error);
    if (!library) {
        error_text(msg, "", error, "newLibraryWithSource:options:error: returned nil without an error");
        return CAPSCAN_KERNEL_COMPILE_ERROR;
    }
    for (i = 0; i < STEP_COUNT; i++) {
        int result;
        if (steps[i].cap != which)
            continue;
        msg[0] = '\0';
        result = run_step(c, library, &steps[i], msg);
        if (result != CAPSCAN_KERNEL_PASS)
            return result;
    }
    return CAPSCAN_KERNEL_PASS;
}

void capscan_write_all(int fd, const char *text, unsigned long n)
{
    while (n) {
        ssize_t w = write(fd, text, n);
        if (w <= 0)
            return;
        text += w;
        n -= (unsigned long)w;
    }
}

static void report(int fd, char kind, int which, int result, const char *msg)
{
    static char storage[CAPSCAN_KERNEL_MESSAGE_MAX + 32];
    struct capscan_buf b;

    capscan_buf_init(&b, storage, sizeof storage);
    capscan_buf_char(&b, kind);
    capscan_buf_char(&b, ' ');
    capscan_buf_uint(&b, (unsigned long long)which);
    if (kind == 'R') {
        capscan_buf_char(&b, ' ');
        capscan_buf_uint(&b, (unsigned long long)result);
        capscan_buf_char(&b, ' ');
        capscan_buf_str(&b, msg);
    }
    capscan_buf_char(&b, '\n');
    capscan_write_all(fd, b.data, b.len);
}

struct plan {
    int skip[CAPSCAN_KERNEL_COUNT];
    char skip_message[CAPSCAN_KERNEL_COUNT][CAPSCAN_KERNEL_MESSAGE_MAX + 1];
};

/* What not to run on this OS: bfloat below MSL 3.1. */
static void make_plan(const struct capscan_host *host, struct plan *plan)
{
    struct capscan_buf b;
    int major = os_major(host->os_version), i;

    for (i = 0; i < CAPSCAN_KERNEL_COUNT; i++) {
        plan->skip[i] = 0;
        plan->skip_message[i][0] = '\0';
    }
    if (major >= 0 && major < 14) {   /* MTLLanguageVersion3_1 arrived with macOS 14 */
        capscan_buf_init(&b, plan->skip_message[CAPSCAN_KERNEL_BFLOAT], sizeof plan->skip_message[0]);
        capscan_buf_str(&b, "bfloat needs MSL 3.1 (macOS 14 or later); this is macOS ");
        capscan_buf_clean(&b, host->os_version, 16);
        plan->skip[CAPSCAN_KERNEL_BFLOAT] = 1;
    }
}

static void __attribute__((noreturn)) child_main(int fd, const struct plan *plan, unsigned long long deadline)
{
    static char msg[CAPSCAN_KERNEL_MESSAGE_MAX + 1];
    struct child c;
    int i;

    c.device = MTLCreateSystemDefaultDevice();
    c.queue = 0;
    c.nsstring = objc_lookUpClass("NSString");
    c.options = objc_lookUpClass("MTLCompileOptions");
    c.constants = objc_lookUpClass("MTLFunctionConstantValues");
    c.deadline = deadline;
    for (i = 0; i < CAPSCAN_KERNEL_COUNT; i++) {
        int result;
        if (!c.device) {
            report(fd, 'R', i, CAPSCAN_KERNEL_NOT_RUN, "no Metal device");
            continue;
        }
        if (plan->skip[i]) {
            report(fd, 'R', i, CAPSCAN_KERNEL_NOT_RUN, plan->skip_message[i]);
            continue;
        }
        report(fd, 'B', i, 0, "");
        msg[0] = '\0';
        result = run_kernel(&c, i, msg);
        report(fd, 'R', i, result, msg);
        if (result == CAPSCAN_KERNEL_TIMEOUT)
            break;   /* the queue is stuck behind it; the parent fills in the rest */
    }
    close(fd);
    _exit(0);
}

/* ------------------------------------------------------------------ the parent */

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGABRT: return "SIGABRT";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGSYS: return "SIGSYS";
    case SIGPIPE: return "SIGPIPE";
    default: return "unknown signal";
    }
}

static void set_result(struct capscan_kernels *out, int which, int result, const char *msg)
{
    out->cap[which].result = result;
    clean_message(out->cap[which].message, msg);
}

static void parse_reports(const char *data, unsigned long len, int *seen, int *began, struct capscan_kernels *out)
{
    static char line[CAPSCAN_KERNEL_MESSAGE_MAX + 64];
    unsigned long start = 0, end;

    for (end = 0; end < len; end++) {
        unsigned long n;
        int which, result;
        if (data[end] != '\n')
            continue;
        n = end - start;
        if (n >= sizeof line)
            n = sizeof line - 1;
        copy_text(line, n + 1, data + start);
        start = end + 1;
        if (n < 3 || line[1] != ' ' || line[2] < '0' || line[2] >= '0' + CAPSCAN_KERNEL_COUNT)
            continue;
        which = line[2] - '0';
        if (line[0] == 'B') {
            *began = which;
        } else if (line[0] == 'R' && n >= 5 && line[3] == ' ' && line[4] >= '0' && line[4] <= '0' + CAPSCAN_KERNEL_CRASH) {
            result = line[4] - '0';
            set_result(out, which, result, n > 6 ? line + 6 : "");
            seen[which] = 1;
        }
    }
}

/* The last bytes the child wrote to stderr. */
static void keep_tail(char *tail, unsigned long *len, unsigned long cap, const char *chunk, unsigned long n)
{
    unsigned long i;

    if (n >= cap) {
        chunk += n - cap;
        n = cap;
    }
    if (*len + n > cap) {
        unsigned long drop = *len + n - cap;
        for (i = drop; i < *len; i++)
            tail[i - drop] = tail[i];
        *len -= drop;
    }
    for (i = 0; i < n; i++)
        tail[(*len)++] = chunk[i];
}

/* "; stderr: <its last non-empty line>" (an ObjC exception's reason, say). */
static void add_stderr(struct capscan_buf *b, const char *err)
{
    const char *end = err, *line;

    while (*end)
        end++;
    while (end > err && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
        end--;
    for (line = end; line > err && line[-1] != '\n'; line--)
        ;
    if (line == end)
        return;
    capscan_buf_str(b, "; stderr: ");
    while (line < end)
        capscan_buf_char(b, *line++);
}

void capscan_self_path(char *dst, unsigned long size)
{
#if defined(__APPLE__)
    unsigned int n = (unsigned int)size;
    if (_NSGetExecutablePath(dst, &n) != 0)
        dst[0] = '\0';
#else
    copy_text(dst, size, "/proc/self/exe");
#endif
}

void capscan_kernels_child(unsigned long budget_ms)
{
    struct capscan_host host;
    struct plan plan;

    capscan_host_query(&host);
    make_plan(&host, &plan);
    child_main(1, &plan, now_ms() + budget_ms);
}

void capscan_kernels_run(const struct capscan_host *host, const char *self, unsigned long timeout_ms,
                         struct capscan_kernels *out)
{
    static char data[8192];
    static char msg[CAPSCAN_KERNEL_MESSAGE_MAX + 1];
    static char budget[24];
    char *child_argv[4];
    struct capscan_buf b;
    unsigned long len = 0, margin;
    unsigned long long start, deadline;
    static char err[512];
    unsigned long err_len = 0;
    int fds[2], efds[2], seen[CAPSCAN_KERNEL_COUNT], i, status = 0, began = -1;
    int eof = 0, err_eof = 0, open_fds = 1, killed = 0, reaped = 0;
    int major = os_major(host->os_version);
    pid_t pid;

    copy_text(out->msl_version, sizeof out->msl_version, msl_for_os(major));
    for (i = 0; i < CAPSCAN_KERNEL_COUNT; i++) {
        out->cap[i].result = CAPSCAN_KERNEL_NOT_RUN;
        out->cap[i].message[0] = '\0';
        seen[i] = 0;
    }

    start = now_ms();
    deadline = start + timeout_ms;
    /* The child gives up on a command buffer a little before the parent's
     * deadline, so it can still say which status it was stuck in. */
    margin = timeout_ms / 10 < 200 ? timeout_ms / 10 : 200;

    if (pipe(fds) != 0 || pipe(efds) != 0) {
        for (i = 0; i < CAPSCAN_KERNEL_COUNT; i++)
            set_result(out, i, CAPSCAN_KERNEL_NOT_RUN, "pipe() failed");
        out->elapsed_ms = 0;
        return;
    }
    /* Everything the child needs is made before fork: between fork and execv
     * only async-signal-safe calls. */
    capscan_buf_init(&b, budget, sizeof budget);
    capscan_buf_uint(&b, timeout_ms - margin);
    child_argv[0] = (char *)"capscan-probe";
    child_argv[1] = (char *)"--kernel-check";
    child_argv[2] = budget;
    child_argv[3] = 0;
    pid = fork();
    if (pid == 0) {
        /* The report on stdout, stderr to the parent (not the caller: Metal's and
         * an injected interposer's lines belong to the parent's own run; the tail
         * is kept for a child that dies). */
        dup2(fds[1], 1);
        dup2(efds[1], 2);
        if (fds[1] > 2)
            close(fds[1]);
        if (efds[1] > 2)
            close(efds[1]);
        close(fds[0]);
        close(efds[0]);
        execv(self, child_argv);
        _exit(127);
    }
    close(fds[1]);
    close(efds[1]);
    if (pid < 0) {
        close(fds[0]);
        close(efds[0]);
        for (i = 0; i < CAPSCAN_KERNEL_COUNT; i++)
            set_result(out, i, CAPSCAN_KERNEL_NOT_RUN, "fork() failed");
        out->elapsed_ms = now_ms() - start;
        return;
    }

    /* Read both pipes until EOF (the child exited) or the deadline. */
    while (open_fds) {
        unsigned long long now = now_ms();
        struct pollfd p[2];
        unsigned n = 0, j;
        if (now >= deadline)
            break;
        if (!eof) {
            p[n].fd = fds[0];
            p[n].events = POLLIN;
            p[n++].revents = 0;
        }
        if (!err_eof) {
            p[n].fd = efds[0];
            p[n].events = POLLIN;
            p[n++].revents = 0;
        }
        if (poll(p, n, (int)(deadline - now)) <= 0)
            continue;
        for (j = 0; j < n; j++) {
            ssize_t got;
            if (!p[j].revents)
                continue;
            if (p[j].fd == fds[0]) {
                got = read(fds[0], data + len, len < sizeof data ? sizeof data - len : 0);
                if (got > 0)
                    len += (unsigned long)got;
                else if (got == 0 || len >= sizeof data)
                    eof = 1;
                else
                    usleep(1000);
            } else {
                char chunk[512];
                got = read(efds[0], chunk, sizeof chunk);
                if (got > 0)
                    keep_tail(err, &err_len, sizeof err - 1, chunk, (unsigned long)got);
                else if (got == 0)
                    err_eof = 1;
                else
                    usleep(1000);
            }
        }
        open_fds = !eof || !err_eof;
    }
    close(fds[0]);
    close(efds[0]);
    err[err_len] = '\0';
    /* Reap: an exiting child has closed the pipe; give it until the deadline. */
    while (!reaped) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) {
            reaped = 1;
        } else if (w < 0) {
            break;
        } else if (now_ms() >= deadline && !killed) {
            kill(pid, SIGKILL);
            killed = 1;
        } else if (killed) {
            if (waitpid(pid, &status, 0) == pid)
                reaped = 1;
            break;
        } else {
            usleep(1000);
        }
    }
    out->elapsed_ms = now_ms() - start;

    parse_reports(data, len, seen, &began, out);
    for (i = 0; i < CAPSCAN_KERNEL_COUNT; i++) {
        if (seen[i])
            continue;
        capscan_buf_init(&b, msg, sizeof msg);
        if (killed || !reaped) {
            capscan_buf_str(&b, "no result within ");
            capscan_buf_uint(&b, timeout_ms);
            capscan_buf_str(&b, i == began ? " ms (the check was killed while running this kernel)"
                                           : " ms (the check was killed before this kernel ran)");
            set_result(out, i, CAPSCAN_KERNEL_TIMEOUT, msg);
        } else if (WIFSIGNALED(status)) {
            capscan_buf_str(&b, "the check died by signal ");
            capscan_buf_uint(&b, (unsigned long long)WTERMSIG(status));
            capscan_buf_str(&b, " (");
            capscan_buf_str(&b, signal_name(WTERMSIG(status)));
            capscan_buf_str(&b, i == began ? ") while running this kernel" : ") before this kernel ran");
            if (i == began)
                add_stderr(&b, err);
            set_result(out, i, CAPSCAN_KERNEL_CRASH, msg);
        } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
            capscan_buf_str(&b, "the check exited with status ");
            capscan_buf_uint(&b, (unsigned long long)WEXITSTATUS(status));
            if (i == began || began < 0)
                add_stderr(&b, err);
            set_result(out, i, CAPSCAN_KERNEL_CRASH, msg);
        } else {
            capscan_buf_str(&b, "not run before the deadline: an earlier kernel timed out");
            set_result(out, i, CAPSCAN_KERNEL_TIMEOUT, msg);
        }
    }
}
