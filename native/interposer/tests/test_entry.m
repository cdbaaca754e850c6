/* Entry layer against GCC's Objective-C runtime (ASan+UBSan): both hook
 * paths, the interposing self-check and the scrub switch, with a fake
 * platform (environment table, captured stderr).
 *
 *   TRoot
 *   +- _MTLDevice         like Metal's private base: owns initGPUFamilySupport
 *   |  +- TParavirt       inherits everything (the concrete device class)
 *   +- TLegacy            a device class outside _MTLDevice (factory path)
 *   +- TNoTGDevice        init method but no maxThreadgroupMemoryLength (rollback)
 *   +- TInitBase          owns a method named like the hook point
 *      +- TInitChild      inherits it (override added on the child only) */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <objc/runtime.h>

#include "capscan/entry.h"
#include "capscan/runtime.h"
#include "check.h"

static BOOL paravirtual_supports(long f)
{
    return (f >= 1001 && f <= 1005) || f == 2002 || (f >= 3001 && f <= 3003);
}

__attribute__((objc_root_class))
@interface TRoot
{
    Class isa;
}
+ (id)new;
+ (Class)class;
@end
@implementation TRoot
+ (id)new
{
    return class_createInstance(self, 0);
}
+ (Class)class
{
    return self;
}
@end

static int init_calls;

@interface _MTLDevice : TRoot
- (void)initGPUFamilySupport;
- (BOOL)supportsFamily:(long)family;
- (unsigned long)maxThreadgroupMemoryLength;
@end
@implementation _MTLDevice
- (void)initGPUFamilySupport
{
    init_calls++;
}
- (BOOL)supportsFamily:(long)family
{
    return paravirtual_supports(family);
}
- (unsigned long)maxThreadgroupMemoryLength
{
    return 32768;
}
@end

@interface TParavirt : _MTLDevice
@end
@implementation TParavirt
@end

@interface TLegacy : TRoot
- (BOOL)supportsFamily:(long)family;
- (unsigned long)maxThreadgroupMemoryLength;
@end
@implementation TLegacy
- (BOOL)supportsFamily:(long)family
{
    return paravirtual_supports(family);
}
- (unsigned long)maxThreadgroupMemoryLength
{
    return 32768;
}
@end

@interface TNoTGDevice : TRoot
- (void)initGPUFamilySupport;
- (BOOL)supportsFamily:(long)family;
@end
@implementation TNoTGDevice
- (void)initGPUFamilySupport
{
    init_calls++;
}
- (BOOL)supportsFamily:(long)family
{
    return paravirtual_supports(family);
}
@end

@interface TInitBase : TRoot
- (void)initGPUFamilySupport;
@end
@implementation TInitBase
- (void)initGPUFamilySupport
{
    init_calls++;
}
@end
@interface TInitChild : TInitBase
@end
@implementation TInitChild
@end

/* ------------------------------------------------------------ fake platform */

static const char *const *fake_env;
static char captured[4096];
static unsigned long captured_len;
static char set_name[64], set_value[256];
static int set_calls, set_removed;

static const char *lookup(const char *name)
{
    const char *const *p;
    for (p = fake_env; p && *p; p += 2)
        if (strcmp(p[0], name) == 0)
            return p[1];
    return NULL;
}

static const char *progname(void)
{
    return "test_entry";
}

static void capture(const char *text, unsigned long length)
{
    if (captured_len + length >= sizeof captured)
        length = sizeof captured - 1 - captured_len;
    memcpy(captured + captured_len, text, length);
    captured_len += length;
    captured[captured_len] = '\0';
}

static int fake_set_env(const char *name, const char *value)
{
    set_calls++;
    strncpy(set_name, name, sizeof set_name - 1);
    set_removed = value == NULL;
    strncpy(set_value, value ? value : "", sizeof set_value - 1);
    return 0;
}

static const char *fake_self;   /* what dladdr would say this library was loaded from */

static const char *fake_self_path(void)
{
    return fake_self;
}

static const struct capscan_platform platform = {
    lookup, progname, capture, fake_set_env, "DYLD_INSERT_LIBRARIES", ":", fake_self_path
};

static void start(const char *const *env)
{
    capscan_entry_reset();
    captured_len = 0;
    captured[0] = '\0';
    set_calls = set_removed = 0;
    set_name[0] = set_value[0] = '\0';
    init_calls = 0;
    fake_self = "/b/libcapscan_interposer.dylib";
    fake_env = env;
    capscan_entry_init(&platform);
}

static int said(const char *line)
{
    return strstr(captured, line) != NULL;
}

static int count_lines(void)
{
    int n = 0;
    const char *p;
    for (p = captured; *p; p++)
        n += *p == '\n';
    return n;
}

#define BANNER "[capscan-interposer] enabled for test_entry (apple_family_max=1007 threadgroup_memory=stock)\n"

/* ------------------------------------------------------------------ tests */

static void test_init_hook_patches_during_creation(void)
{
    const char *env[] = {CAPSCAN_ENV_FAMILY, "1007", CAPSCAN_ENV_VERBOSE, "1", NULL};
    id dev;

    start(env);
    CHECK(capscan_entry_install_init_hook() == 1);
    CHECK(said("[capscan-interposer] hook point in test_entry: hooked -[_MTLDevice initGPUFamilySupport]"));
    dev = [TParavirt new];
    CHECK(![dev supportsFamily:1007]);            /* nothing patched before init */
    [dev initGPUFamilySupport];
    CHECK(init_calls == 1);                       /* the original still runs */
    CHECK([dev supportsFamily:1007] && [dev supportsFamily:1001] && ![dev supportsFamily:1008]);
    CHECK(![dev supportsFamily:5001] && ![dev supportsFamily:5002]);   /* never Metal3/Metal4 */
    CHECK([dev maxThreadgroupMemoryLength] == 32768);                  /* stock threadgroup memory */
    CHECK(said("[capscan-interposer] patched device class TParavirt (from -[_MTLDevice initGPUFamilySupport])\n"));
    CHECK(said(BANNER));
    /* per-class patching: the base class keeps its stock answers */
    CHECK(![[_MTLDevice new] supportsFamily:1007]);
    /* the factory wrapper afterwards finds the class already patched: no second banner */
    capscan_entry_patch_device(dev);
    CHECK(strstr(strstr(captured, BANNER) + strlen(BANNER), "enabled for") == NULL);
    /* the self-check with interposing in effect says nothing */
    captured_len = 0;
    captured[0] = '\0';
    capscan_entry_report_interposing(1);
    CHECK(captured_len == 0);
}

static void test_factory_path_is_the_fallback(void)
{
    const char *env[] = {CAPSCAN_ENV_FAMILY, "1007", CAPSCAN_ENV_VERBOSE, "1", NULL};
    id dev;

    start(env);
    capscan_entry_install_init_hook();
    dev = [TLegacy new];                          /* never goes through initGPUFamilySupport */
    CHECK(![dev supportsFamily:1007]);
    CHECK(capscan_entry_patch_device(dev) == dev);
    CHECK([dev supportsFamily:1007] && ![dev supportsFamily:5001]);
    CHECK(said("[capscan-interposer] patched device class TLegacy (from the device factory)\n"));
    CHECK(said(BANNER));
    CHECK(capscan_entry_patch_device(nil) == nil);
}

static void test_interposing_disabled_is_reported(void)
{
    const char *env[] = {CAPSCAN_ENV_FAMILY, "1007", NULL};
    const char *inactive[] = {NULL};
    const char *verbose[] = {CAPSCAN_ENV_VERBOSE, "1", NULL};

    const char *verbose_on[] = {CAPSCAN_ENV_FAMILY, "1007", CAPSCAN_ENV_VERBOSE, "1", NULL};

    /* the init hook still patches every device: not a failure, so quiet unless verbose */
    start(env);
    capscan_entry_install_init_hook();
    capscan_entry_report_interposing(0);
    CHECK(captured_len == 0);
    start(verbose_on);
    capscan_entry_install_init_hook();
    captured_len = 0;
    captured[0] = '\0';
    capscan_entry_report_interposing(0);
    CHECK(count_lines() == 1);
    CHECK(said("[capscan-interposer] interposing is disabled in test_entry: MTLCreateSystemDefaultDevice is not "
               "capscan's wrapper (the loader did not apply __interpose); devices are still patched through "
               "-[_MTLDevice initGPUFamilySupport]\n"));

    start(env);                                   /* no init hook installed: nothing left, always said */
    capscan_entry_report_interposing(0);
    CHECK(count_lines() == 1);
    CHECK(said("and there is no -[_MTLDevice initGPUFamilySupport] to hook; Metal answers stay stock\n"));
    start(env);                                   /* interposed: nothing to say */
    capscan_entry_install_init_hook();
    capscan_entry_report_interposing(1);
    CHECK(captured_len == 0);

    start(inactive);                              /* inert and quiet: nothing to say */
    CHECK(capscan_entry_install_init_hook() == 0);
    capscan_entry_report_interposing(0);
    CHECK(captured_len == 0);
    start(verbose);
    capscan_entry_report_interposing(0);
    CHECK(said("interposing is disabled in test_entry"));
}

static void test_inactive_policy_installs_no_init_hook(void)
{
    const char *env[] = {CAPSCAN_ENV_FAMILY, "1007junk", NULL};
    id dev;

    start(env);
    CHECK(capscan_entry_install_init_hook() == 0);
    dev = [TParavirt new];
    [dev initGPUFamilySupport];
    CHECK(init_calls == 1 && ![dev supportsFamily:1007] && captured_len == 0);
}

static void patch_it(id device)
{
    capscan_entry_patch_device(device);
}

static void test_rollback_through_the_init_hook(void)
{
    const char *env[] = {CAPSCAN_ENV_FAMILY, "1007", CAPSCAN_ENV_TG_FLOOR, "65536", NULL};
    id dev;

    start(env);
    CHECK(capscan_runtime_hook_init(objc_lookUpClass("TNoTGDevice"), "initGPUFamilySupport",
                                    patch_it) == CAPSCAN_INIT_HOOKED);
    dev = [TNoTGDevice new];
    [dev initGPUFamilySupport];
    CHECK(init_calls == 1);
    CHECK(![dev supportsFamily:1007]);            /* rolled back: stock answers */
    CHECK(said("[capscan-interposer] disabled for test_entry: device class has no maxThreadgroupMemoryLength "
               "(class TNoTGDevice); all hooks rolled back, stock answers kept\n"));
}

static int child_init_seen;

static void note_child(id self)
{
    (void)self;
    child_init_seen++;
}

static void test_runtime_init_hook_cases(void)
{
    id base, child;

    capscan_entry_reset();
    init_calls = 0;
    CHECK(capscan_runtime_hook_init(Nil, "initGPUFamilySupport", note_child) == CAPSCAN_INIT_NO_CLASS);
    CHECK(capscan_runtime_hook_init(objc_lookUpClass("TLegacy"), "initGPUFamilySupport", note_child) ==
          CAPSCAN_INIT_NO_METHOD);
    /* inherited: the override goes on the child only */
    CHECK(capscan_runtime_hook_init(objc_lookUpClass("TInitChild"), "initGPUFamilySupport", note_child) ==
          CAPSCAN_INIT_HOOKED);
    CHECK(capscan_runtime_hook_init(objc_lookUpClass("TInitChild"), "initGPUFamilySupport", note_child) ==
          CAPSCAN_INIT_HOOKED);                   /* idempotent */
    base = [TInitBase new];
    child = [TInitChild new];
    [base initGPUFamilySupport];
    CHECK(child_init_seen == 0 && init_calls == 1);
    [child initGPUFamilySupport];
    CHECK(child_init_seen == 1 && init_calls == 2);  /* hooked once, original called once */
    capscan_runtime_unhook_init();
    [child initGPUFamilySupport];
    CHECK(child_init_seen == 1 && init_calls == 3);
}

static void test_scrub(void)
{
    const char *on[] = {CAPSCAN_ENV_SCRUB, "1", CAPSCAN_ENV_VERBOSE, "1", "DYLD_INSERT_LIBRARIES",
                        "/a/libother.dylib:/b/libcapscan_interposer.dylib", NULL};
    const char *alone[] = {CAPSCAN_ENV_SCRUB, "1", "DYLD_INSERT_LIBRARIES", "/b/libcapscan_interposer.dylib", NULL};
    const char *off[] = {CAPSCAN_ENV_FAMILY, "1007", "DYLD_INSERT_LIBRARIES", "/b/libcapscan_interposer.dylib",
                         NULL};

    start(on);
    CHECK(set_calls == 1 && strcmp(set_name, "DYLD_INSERT_LIBRARIES") == 0 && !set_removed);
    CHECK(strcmp(set_value, "/a/libother.dylib") == 0);
    CHECK(said("scrubbed the injection variable in test_entry (CAPSCAN_INTERPOSER_SCRUB=1)"));
    start(alone);
    CHECK(set_calls == 1 && set_removed && captured_len == 0);
    start(off);                                   /* off by default */
    CHECK(set_calls == 0);
}

static void test_scrub_names_the_file_injected(void)
{
    const char *renamed[] = {CAPSCAN_ENV_SCRUB, "1", "DYLD_INSERT_LIBRARIES",
                             "/a/libother.dylib:/opt/shims/gpu-fix.dylib", NULL};

    capscan_entry_reset();
    set_calls = 0;
    fake_env = renamed;
    fake_self = "/opt/shims/gpu-fix.dylib";       /* --dylib under another name */
    capscan_entry_init(&platform);
    CHECK(set_calls == 1 && strcmp(set_value, "/a/libother.dylib") == 0);
}

static void test_scrub_at_the_first_device(void)
{
    const char *env[] = {CAPSCAN_ENV_SCRUB, "device", CAPSCAN_ENV_FAMILY, "1007", CAPSCAN_ENV_VERBOSE, "1",
                         "DYLD_INSERT_LIBRARIES", "/b/libcapscan_interposer.dylib", NULL};
    const char *inert[] = {CAPSCAN_ENV_SCRUB, "device", "DYLD_INSERT_LIBRARIES", "/b/libcapscan_interposer.dylib",
                           NULL};
    id dev;

    start(env);                                   /* a launcher: loaded, no device yet, passes it on */
    CHECK(set_calls == 0);
    dev = [TParavirt new];
    capscan_entry_patch_device(dev);              /* the process that uses Metal drops it */
    CHECK(set_calls == 1 && set_removed);
    CHECK(said("scrubbed the injection variable in test_entry (CAPSCAN_INTERPOSER_SCRUB=device, at its first "
               "Metal device)"));
    capscan_entry_patch_device([TParavirt new]);
    CHECK(set_calls == 1);                        /* once */
    CHECK([dev supportsFamily:1007]);
    start(inert);                                 /* an inert policy uses nothing: dropped at once */
    CHECK(set_calls == 1 && set_removed);
}

/* Each case runs in its own process: the hooks are process-wide, and GCC's
 * runtime handles a base class's method being re-pointed differently from
 * Apple's (its method_setImplementation also re-points subclasses' own
 * overrides), so unhook-then-hook in one process would test the runtime's
 * dispatch tables, not capscan.  For the same reason a subclass that
 * overrides initGPUFamilySupport and calls super cannot be tested here. */
static void run_case(void (*test)(void))
{
    int fds[2], counts[2] = {0, 1}, status = 0;
    pid_t pid;

    if (pipe(fds) != 0) {
        check_failed++;
        return;
    }
    pid = fork();
    if (pid == 0) {
        close(fds[0]);
        check_passed = check_failed = 0;
        test();
        counts[0] = check_passed;
        counts[1] = check_failed;
        if (write(fds[1], counts, sizeof counts) != (ssize_t)sizeof counts)
            _exit(1);
        _exit(0);
    }
    close(fds[1]);
    if (pid < 0 || read(fds[0], counts, sizeof counts) != (ssize_t)sizeof counts) {
        counts[0] = 0;
        counts[1] = 1;
        fprintf(stderr, "FAIL: a test case crashed\n");
    }
    close(fds[0]);
    if (pid > 0)
        waitpid(pid, &status, 0);
    if (pid > 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0) && counts[1] == 0)
        counts[1] = 1;
    check_passed += counts[0];
    check_failed += counts[1];
}

int main(void)
{
    run_case(test_init_hook_patches_during_creation);
    run_case(test_factory_path_is_the_fallback);
    run_case(test_interposing_disabled_is_reported);
    run_case(test_inactive_policy_installs_no_init_hook);
    run_case(test_rollback_through_the_init_hook);
    run_case(test_runtime_init_hook_cases);
    run_case(test_scrub);
    run_case(test_scrub_names_the_file_injected);
    run_case(test_scrub_at_the_first_device);
    return check_summary();
}
