/* capscan-probe's host-proof values and --kernels checks (src/probe_kernels.c). */
#ifndef CAPSCAN_PROBE_KERNELS_H
#define CAPSCAN_PROBE_KERNELS_H

enum {
    CAPSCAN_KERNEL_REDUCTION,   /* simdgroup_reduction */
    CAPSCAN_KERNEL_MM,          /* simdgroup_mm */
    CAPSCAN_KERNEL_BFLOAT,      /* bfloat */
    CAPSCAN_KERNEL_COUNT
};

enum {
    CAPSCAN_KERNEL_NOT_RUN,
    CAPSCAN_KERNEL_PASS,
    CAPSCAN_KERNEL_FAIL,
    CAPSCAN_KERNEL_COMPILE_ERROR,
    CAPSCAN_KERNEL_TIMEOUT,
    CAPSCAN_KERNEL_CRASH        /* the check process died or exited non-zero: it could not run */
};

#define CAPSCAN_KERNEL_MESSAGE_MAX 300   /* bytes, ASCII, no control characters */
#define CAPSCAN_KERNEL_TIMEOUT_DEFAULT_MS 20000

struct capscan_kernel_result {
    int result;
    char message[CAPSCAN_KERNEL_MESSAGE_MAX + 1];   /* "" = none */
};

struct capscan_kernels {
    char msl_version[8];            /* highest MSL the OS's compiler takes; "" = unknown */
    unsigned long long elapsed_ms;
    struct capscan_kernel_result cap[CAPSCAN_KERNEL_COUNT];
};

struct capscan_host {
    char cpu_brand[257];            /* machdep.cpu.brand_string; "" = unavailable */
    const char *arch;               /* arm64 | x86_64, from the compile target */
    int hv_vmm_present;             /* kern.hv_vmm_present: 1, 0, or -1 = unavailable */
    char os_version[32];            /* kern.osproductversion; "" = unavailable */
};

extern const char *const capscan_kernel_names[CAPSCAN_KERNEL_COUNT];
const char *capscan_kernel_result_name(int result);

/* sysctl only: safe before and after Metal. */
void capscan_host_query(struct capscan_host *host);

/* Runs every check in a fresh process (fork + execv of `self --kernel-check MS`)
 * and waits at most timeout_ms for it.  The child creates its own device.
 * Never crashes or hangs the caller. */
void capscan_kernels_run(const struct capscan_host *host, const char *self, unsigned long timeout_ms,
                         struct capscan_kernels *out);

/* The exec'd child (`capscan-probe --kernel-check MS`): runs the checks, reports on
 * stdout, gives up on a command buffer after budget_ms, exits. */
void capscan_kernels_child(unsigned long budget_ms) __attribute__((noreturn));

/* This executable's path for the child's execv ("" when unknown). */
void capscan_self_path(char *dst, unsigned long size);

/* CAPSCAN_PROBE_KERNEL_TIMEOUT_MS: decimal 1..600000; anything else gives the default. */
unsigned long capscan_kernel_timeout_ms(const char *value);

/* Writes all n bytes (a short write continues; an error stops): the probe's output and the
 * kernel child's report to its parent. */
void capscan_write_all(int fd, const char *text, unsigned long n);

#endif
