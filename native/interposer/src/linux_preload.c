/* Linux LD_PRELOAD stand-in for the macOS dylib: the same entry, runtime
 * and policy layers; the real factory functions come from dlsym(RTLD_NEXT)
 * instead of dyld's __interpose tuples.  Linked against libfakemetal.so the
 * way the dylib is linked against Metal, so the fake _MTLDevice class is
 * registered before the constructor looks for it.  Used to test the whole
 * injection path. */
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

static int set_env(const char *name, const char *value)
{
    return value ? setenv(name, value, 1) : unsetenv(name);
}

/* The file ld.so loaded this library from (the LD_PRELOAD entry as given,
 * when it has a slash). */
static const char *self_path(void)
{
    Dl_info info;

    if (!dladdr((void *)&self_path, &info))
        return 0;
    return info.dli_fname;
}

/* ld.so separates LD_PRELOAD entries with colons or whitespace. */
static const struct capscan_platform platform = {
    env, progname, write_stderr, set_env, "LD_PRELOAD", ": \t", self_path
};

static id call_next(const char *name)
{
    void *symbol = dlsym(RTLD_NEXT, name);
    factory_fn next;

    if (!symbol)
        return 0;
    *(void **)&next = symbol;   /* POSIX-sanctioned object-to-function cast */
    return next();
}

/* The wrappers are defined under local names and exported as aliases, so
 * the self-check compares with this library's own code (a plain reference
 * to an exported name could itself be resolved to another library's). */
static id capscan_create_system_default_device(void)
{
    return capscan_entry_patch_device(call_next("MTLCreateSystemDefaultDevice"));
}

static id capscan_copy_all_devices(void)
{
    return capscan_entry_patch_devices(call_next("MTLCopyAllDevices"));
}

CAPSCAN_EXPORT id MTLCreateSystemDefaultDevice(void) __attribute__((alias("capscan_create_system_default_device")));
CAPSCAN_EXPORT id MTLCopyAllDevices(void) __attribute__((alias("capscan_copy_all_devices")));

__attribute__((constructor)) static void capscan_load(void)
{
    void *resolved;

    capscan_entry_init(&platform);
    capscan_entry_install_init_hook();
    /* Preloaded, the global lookup finds our wrapper first; loaded any other
     * way (dlopen), it finds the real one: the stand-in for dyld's
     * interposing being switched off. */
    resolved = dlsym(RTLD_DEFAULT, "MTLCreateSystemDefaultDevice");
    capscan_entry_report_interposing(resolved == (void *)(factory_fn)capscan_create_system_default_device);
}
