/* The OS calls capscan-probe makes besides libc_min.h's: sysctlbyname for the
 * host-proof lines, and fork/execv/pipe/poll/waitpid/kill for the kernel
 * checks' child (_NSGetExecutablePath: the probe's own path, to exec).  Real headers where they exist; for the SDK-less macOS cross build,
 * hand-written declarations with Darwin's ABI and constant values.  On Linux,
 * sysctlbyname comes from libfakemetal (tests/fake_metal.m). */
#ifndef CAPSCAN_PROBE_SYS_H
#define CAPSCAN_PROBE_SYS_H

#include "capscan/libc_min.h"

#if defined(CAPSCAN_NO_SDK)
typedef int pid_t;
struct pollfd {
    int fd;
    short events;
    short revents;
};
struct timespec {
    long tv_sec;
    long tv_nsec;
};
pid_t fork(void);
int execv(const char *path, char *const argv[]);
int _NSGetExecutablePath(char *buf, unsigned int *bufsize);
pid_t waitpid(pid_t pid, int *status, int options);
int pipe(int fds[2]);
int poll(struct pollfd *fds, unsigned int nfds, int timeout);
int kill(pid_t pid, int sig);
int usleep(unsigned int usec);
void _exit(int status) __attribute__((noreturn));
int close(int fd);
int dup2(int from, int to);
ssize_t read(int fd, void *buf, size_t count);
int sysctlbyname(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);
int clock_gettime(int clock_id, struct timespec *tp);
#define POLLIN 0x0001
#define WNOHANG 0x00000001
#define CLOCK_MONOTONIC 6          /* Darwin's _CLOCK_MONOTONIC */
#define WIFEXITED(s) (((s) & 0177) == 0)
#define WEXITSTATUS(s) (((s) >> 8) & 0xff)
#define WIFSIGNALED(s) (((s) & 0177) != 0177 && ((s) & 0177) != 0)
#define WTERMSIG(s) ((s) & 0177)
/* Darwin's signal numbers (<sys/signal.h>) */
#define SIGILL 4
#define SIGTRAP 5
#define SIGABRT 6
#define SIGFPE 8
#define SIGKILL 9
#define SIGBUS 10
#define SIGSEGV 11
#define SIGSYS 12
#define SIGPIPE 13
#define SIGTERM 15
#else
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__APPLE__)
#include <mach-o/dyld.h>
#include <sys/sysctl.h>
#else
int sysctlbyname(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);
#endif
#endif

#endif
