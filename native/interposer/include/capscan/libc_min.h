/* The handful of libc (and dyld) functions capscan calls.  Real headers when they
 * exist; hand-written declarations for the SDK-less macOS cross build. */
#ifndef CAPSCAN_LIBC_MIN_H
#define CAPSCAN_LIBC_MIN_H

#if defined(CAPSCAN_NO_SDK)
typedef unsigned long size_t;
typedef long ssize_t;
char *getenv(const char *name);
ssize_t write(int fd, const void *buf, size_t count);
const char *getprogname(void);
int setenv(const char *name, const char *value, int overwrite);
int unsetenv(const char *name);
void *dlsym(void *handle, const char *symbol);
#define RTLD_DEFAULT ((void *)-2)   /* <dlfcn.h> on Apple platforms */
typedef struct dl_info {            /* <dlfcn.h> on Apple platforms */
    const char *dli_fname;
    void *dli_fbase;
    const char *dli_sname;
    void *dli_saddr;
} Dl_info;
int dladdr(const void *addr, Dl_info *info);
#else
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>
#endif

#endif
