/* macOS entry: dyld interposes MTLCreateSystemDefaultDevice and
 * MTLCopyAllDevices for every image except this one, so our wrappers call
 * the real functions and patch the class of whatever device they return.
 * The constructor only reads the environment; nothing touches Metal until
 * the process asks for a device. */
#include "capscan/entry.h"
#include "capscan/libc_min.h"

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

static const struct capscan_platform platform = {env, progname, write_stderr};

__attribute__((constructor)) static void capscan_load(void)
{
    capscan_entry_init(&platform);
}

static id capscan_MTLCreateSystemDefaultDevice(void)
{
    return capscan_entry_patch_device(MTLCreateSystemDefaultDevice());
}

static id capscan_MTLCopyAllDevices(void)
{
    return capscan_entry_patch_devices(MTLCopyAllDevices());
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
