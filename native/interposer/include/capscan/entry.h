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
};

/* Idempotent; the first call wins.  Until it runs, the patch functions do
 * nothing (fail closed). */
void capscan_entry_init(const struct capscan_platform *platform);

/* Patch the class of device (may be nil); returns device unchanged. */
id capscan_entry_patch_device(id device);

/* Patch every element of an NSArray-like object; returns it unchanged. */
id capscan_entry_patch_devices(id devices);

#endif
