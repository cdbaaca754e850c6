/* dlopen-late LIBRARY: load the interposer with dlopen(RTLD_LOCAL) after
 * the fake Metal, then ask for the default device and print its answers.
 * The library's constructor runs, but the global lookup still finds the
 * fake Metal's MTLCreateSystemDefaultDevice: interposing "did not happen",
 * as when AMFI disables it for a process on macOS.  The init hook (if the
 * policy is active) still patches the device while it is created. */
#include <dlfcn.h>
#include <stdio.h>

#include "fake_metal.h"

int main(int argc, char **argv)
{
    id dev;

    if (argc != 2) {
        fprintf(stderr, "usage: dlopen-late LIBRARY\n");
        return 2;
    }
    if (!dlopen(argv[1], RTLD_NOW | RTLD_LOCAL)) {
        fprintf(stderr, "dlopen-late: %s\n", dlerror());
        return 1;
    }
    dev = MTLCreateSystemDefaultDevice();
    if (!dev)
        return 1;
    printf("apple7=%d apple8=%d metal3=%d tg=%lu\n", (int)[dev supportsFamily:1007], (int)[dev supportsFamily:1008],
           (int)[dev supportsFamily:5001], [dev maxThreadgroupMemoryLength]);
    return 0;
}
