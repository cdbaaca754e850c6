/* macOS entry: dyld interposes MTLCreateSystemDefaultDevice and
 * MTLCopyAllDevices for every image except this one, so our wrappers call
 * the real functions and patch the class of whatever device they return.
 *
 * The constructor reads the environment, hooks -[_MTLDevice
 * initGPUFamilySupport] when Metal has it (the hook point every published
 * shim uses; Metal is a load-time dependency, so its classes are there),
 * and checks that dyld really applied the interposing: when AMFI disables
 * interposing for a process, the constructor still runs but the wrappers
 * are never called, and one stderr line says so. */
#include "capscan/entry.h"
#include "capscan/libc_min.h"

#if defined(__has_feature)
#if __has_feature(ptrauth_calls)
#include <ptrauth.h>
#define CAPSCAN_STRIP(p) ptrauth_strip((p), ptrauth_key_function_pointer)
#endif
#endif
#ifndef CAPSCAN_STRIP
#define CAPSCAN_STRIP(p) (p)
#endif

extern id MTLCreateSystemDefaultDevice(void);
extern id MTLCopyAllDevices(void);

static const char *env(const char *name)
{
    return getenv(name);
}

static const char *progname(void)
{
    const char *name = getprogname();
    return name ? name : "unknown";
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

/* The path dyld loaded this library from (the DYLD_INSERT_LIBRARIES entry). */
static const char *self_path(void)
{
    Dl_info info;

    if (!dladdr((const void *)&self_path, &info))
        return 0;
    return info.dli_fname;
}

static const struct capscan_platform platform = {
    env, progname, write_stderr, set_env, "DYLD_INSERT_LIBRARIES", ":", self_path
};

static id capscan_MTLCreateSystemDefaultDevice(void)
{
    return capscan_entry_patch_device(MTLCreateSystemDefaultDevice());
}

static id capscan_MTLCopyAllDevices(void)
{
    return capscan_entry_patch_devices(MTLCopyAllDevices());
}

__attribute__((constructor)) static void capscan_load(void)
{
    const void *resolved, *mine;

    capscan_entry_init(&platform);
    capscan_entry_install_init_hook();
    /* dyld applies interposing to dlsym results too: with the tuples in
     * effect this is our wrapper, without them Metal's own function. */
    resolved = dlsym(RTLD_DEFAULT, "MTLCreateSystemDefaultDevice");
    mine = (const void *)&capscan_MTLCreateSystemDefaultDevice;
    capscan_entry_report_interposing(resolved && CAPSCAN_STRIP(resolved) == CAPSCAN_STRIP(mine));
}

/* What DYLD_INTERPOSE in <mach-o/dyld-interposing.h> expands to: {new, old}
 * pairs in a section of type S_INTERPOSING.  The integer cast keeps arm64e
 * compilers from signing the pointers (dyld expects raw addresses). */
struct capscan_interpose {
    const void *replacement;
    const void *replacee;
};

__attribute__((used, section("__DATA,__interpose,interposing")))
static const struct capscan_interpose capscan_interposers[] = {
    {(const void *)(unsigned long)&capscan_MTLCreateSystemDefaultDevice,
     (const void *)(unsigned long)&MTLCreateSystemDefaultDevice},
    {(const void *)(unsigned long)&capscan_MTLCopyAllDevices,
     (const void *)(unsigned long)&MTLCopyAllDevices},
};
