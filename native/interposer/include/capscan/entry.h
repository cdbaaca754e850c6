/* Entry layer shared by the macOS dylib and the Linux LD_PRELOAD stand-in:
 * reads the policy once, patches the classes of devices handed out by the
 * Metal factory functions, and prints the banner and diagnostics. */
#ifndef CAPSCAN_ENTRY_H
#define CAPSCAN_ENTRY_H

#include "capscan/objc_abi.h"
#include "capscan/policy.h"

#define CAPSCAN_LOG_PREFIX "[capscan-interposer] "

struct capscan_platform {
    capscan_getenv_fn getenv;
    const char *(*progname)(void);
    void (*write_stderr)(const char *text, unsigned long length);
    /* value 0 removes the variable; returns 0 on success */
    int (*set_env)(const char *name, const char *value);
    const char *injection_variable;   /* DYLD_INSERT_LIBRARIES or LD_PRELOAD */
    const char *separators;           /* what separates its entries */
    /* the path the loader reports for this library (dladdr), or 0: the scrub
     * removes the entry actually injected, whatever its file name */
    const char *(*self_path)(void);
};

/* Idempotent; the first call wins.  Until it runs, the patch functions do
 * nothing (fail closed).  With CAPSCAN_INTERPOSER_SCRUB=1 it also removes
 * the library from the injection variable (children do not inherit it);
 * with CAPSCAN_INTERPOSER_SCRUB=device that waits for the first device this
 * process asks Metal for (at once when the policy is inactive). */
void capscan_entry_init(const struct capscan_platform *platform);

/* The proven hook point first: when _MTLDevice has initGPUFamilySupport,
 * hook it so every device's concrete class is patched while Metal creates
 * it (as Lume, Tart and Anka do).  Only when the policy is active.  Returns
 * non-zero when the hook is in place.  The factory wrappers stay the
 * fallback. */
int capscan_entry_install_init_hook(void);

/* The constructor's self-check: interposed is non-zero when the loader
 * resolves MTLCreateSystemDefaultDevice to capscan's own wrapper.  When it
 * does not, says so in one stderr line (policy active or verbose). */
void capscan_entry_report_interposing(int interposed);

/* Patch the class of device (may be nil); returns device unchanged. */
id capscan_entry_patch_device(id device);

/* Forget everything and undo every hook (tests use this between cases). */
void capscan_entry_reset(void);

/* Patch every element of an NSArray-like object; returns it unchanged. */
id capscan_entry_patch_devices(id devices);

#endif
