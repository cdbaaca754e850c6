/* Linux LD_PRELOAD stand-in for the macOS dylib: the same entry, runtime
 * and policy layers; the real factory functions come from dlsym(RTLD_NEXT)
 * instead of dyld's __interpose tuples.  Used to test the whole injection
 * path against libfakemetal.so. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "capscan/entry.h"

#define CAPSCAN_EXPORT __attribute__((visibility("default")))

typedef id (*factory_fn)(void);

static const char *env(const char *name)
{
    return getenv(name);
}

static const char *progname(void)
{
    return program_invocation_short_name;
}

static void write_stderr(const char *text, unsigned long length)
{
    while (length) {
        ssize_t n = write(2, text, length);
        if (n <= 0)
            return;
        text += n;
        length -= (unsigned long)n;
    }
}

static const struct capscan_platform platform = {env, progname, write_stderr};

__attribute__((constructor)) static void capscan_load(void)
{
    capscan_entry_init(&platform);
}

static id call_next(const char *name)
{
    void *symbol = dlsym(RTLD_NEXT, name);
    factory_fn next;

    if (!symbol)
        return 0;
    *(void **)&next = symbol;   /* POSIX-sanctioned object-to-function cast */
    return next();
}

CAPSCAN_EXPORT id MTLCreateSystemDefaultDevice(void)
{
    return capscan_entry_patch_device(call_next("MTLCreateSystemDefaultDevice"));
}

CAPSCAN_EXPORT id MTLCopyAllDevices(void)
{
    return capscan_entry_patch_devices(call_next("MTLCopyAllDevices"));
}
