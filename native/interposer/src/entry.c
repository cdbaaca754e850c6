/* Entry layer: policy once per process, patching, banner (see entry.h). */
#include "capscan/entry.h"
#include "capscan/objc_call.h"
#include "capscan/runtime.h"
#include "capscan/scrub.h"
#include "capscan/spinlock.h"
#include "capscan/textbuf.h"

static struct capscan_platform platform;
static struct capscan_policy policy;
static int initialised;
static int banner_printed;
static int failure_printed;
static int init_hooked;
static int scrubbed;
static int lock;

static void emit(struct capscan_buf *line)
{
    capscan_buf_char(line, '\n');
    if (line->len && line->data[line->len - 1] != '\n')
        line->data[line->len - 1] = '\n';   /* truncated: still end the line */
    platform.write_stderr(line->data, line->len);
}

static void start_line(struct capscan_buf *line, const char *what)
{
    capscan_buf_str(line, CAPSCAN_LOG_PREFIX);
    capscan_buf_str(line, what);
    capscan_buf_clean(line, platform.progname(), 64);
}

static void report_inactive(void)
{
    char storage[256];
    struct capscan_buf line;

    capscan_buf_init(&line, storage, sizeof storage);
    start_line(&line, "inactive in ");
    capscan_buf_str(&line, ": ");
    capscan_buf_str(&line, policy.variable ? policy.variable : CAPSCAN_ENV_FAMILY);
    if (policy.value && *policy.value) {
        capscan_buf_str(&line, "=\"");
        capscan_buf_clean(&line, policy.value, 40);
        capscan_buf_char(&line, '"');
    }
    capscan_buf_char(&line, ' ');
    capscan_buf_str(&line, capscan_policy_status_text(policy.status));
    capscan_buf_str(&line, "; Metal answers are left untouched");
    emit(&line);
}

/* The line capscan's parsers recognise: keep this format exactly. */
static void report_enabled(void)
{
    char storage[256];
    struct capscan_buf line;

    capscan_buf_init(&line, storage, sizeof storage);
    start_line(&line, "enabled for ");
    capscan_buf_str(&line, " (apple_family_max=");
    capscan_buf_int(&line, policy.apple_family_max);
    capscan_buf_str(&line, " threadgroup_memory=");
    if (policy.tg_floor)
        capscan_buf_uint(&line, policy.tg_floor);
    else
        capscan_buf_str(&line, "stock");
    capscan_buf_char(&line, ')');
    emit(&line);
}

static void report_failed(Class cls, const char *reason)
{
    char storage[320];
    struct capscan_buf line;

    capscan_buf_init(&line, storage, sizeof storage);
    start_line(&line, "disabled for ");
    capscan_buf_str(&line, ": ");
    capscan_buf_str(&line, reason);
    if (cls) {
        capscan_buf_str(&line, " (class ");
        capscan_buf_clean(&line, class_getName(cls), 80);
        capscan_buf_char(&line, ')');
    }
    capscan_buf_str(&line, "; all hooks rolled back, stock answers kept");
    emit(&line);
}

static void report_patched(Class cls, const char *via)
{
    char storage[256];
    struct capscan_buf line;

    capscan_buf_init(&line, storage, sizeof storage);
    capscan_buf_str(&line, CAPSCAN_LOG_PREFIX "patched device class ");
    capscan_buf_clean(&line, class_getName(cls), 80);
    capscan_buf_str(&line, " (from ");
    capscan_buf_str(&line, via);
    capscan_buf_char(&line, ')');
    emit(&line);
}

static void report_line(const char *what, const char *rest)
{
    char storage[320];
    struct capscan_buf line;

    capscan_buf_init(&line, storage, sizeof storage);
    start_line(&line, what);
    capscan_buf_str(&line, rest);
    emit(&line);
}

/* CAPSCAN_INTERPOSER_SCRUB: drop capscan's entry from the injection
 * variable, so programs this process starts do not load the library.  Once
 * per process; called with the lock held. */
static void scrub(void)
{
    char value[1024];
    const char *current;
    int removed;

    if (scrubbed || !platform.injection_variable || !platform.set_env)
        return;
    __atomic_store_n(&scrubbed, 1, __ATOMIC_RELEASE);
    current = platform.getenv(platform.injection_variable);
    removed = capscan_scrub_list(current, platform.separators ? platform.separators : ":",
                                 platform.self_path ? platform.self_path() : 0, value, sizeof value);
    if (removed <= 0) {
        if (removed < 0)
            report_line("could not scrub the injection variable in ", ": it is too long; children inherit it");
        return;
    }
    platform.set_env(platform.injection_variable, value[0] ? value : 0);
    if (policy.verbose && policy.scrub == CAPSCAN_SCRUB_AT_DEVICE)
        report_line("scrubbed the injection variable in ", " (" CAPSCAN_ENV_SCRUB "=device, at its first Metal "
                    "device): the programs it starts from now on do not load the interposer");
    else if (policy.verbose)
        report_line("scrubbed the injection variable in ", " (" CAPSCAN_ENV_SCRUB "=1): the programs it starts "
                    "do not load the interposer");
}

void capscan_entry_init(const struct capscan_platform *p)
{
    capscan_lock(&lock);
    if (!initialised) {
        platform = *p;
        capscan_policy_from_env(&policy, platform.getenv);
        initialised = 1;
        if (!capscan_policy_active(&policy) && policy.verbose)
            report_inactive();
        /* =device waits for a device (a launcher passes the library on), unless
         * the policy is inert: then nothing here or in a child uses it */
        if (policy.scrub == CAPSCAN_SCRUB_AT_LOAD ||
            (policy.scrub == CAPSCAN_SCRUB_AT_DEVICE && !capscan_policy_active(&policy)))
            scrub();
    }
    capscan_unlock(&lock);
}

static int ready(void)
{
    return __atomic_load_n(&initialised, __ATOMIC_ACQUIRE) && capscan_policy_active(&policy);
}

static id patch_device(id device, const char *via)
{
    const char *reason = 0;
    Class cls;
    enum capscan_patch_result result;

    if (!device || !ready())
        return device;
    if (policy.scrub == CAPSCAN_SCRUB_AT_DEVICE && !__atomic_load_n(&scrubbed, __ATOMIC_ACQUIRE)) {
        capscan_lock(&lock);
        scrub();   /* this process uses Metal: it is the one the library was for */
        capscan_unlock(&lock);
    }
    cls = object_getClass(device);
    result = capscan_runtime_patch_class(cls, &policy, &reason);
    capscan_lock(&lock);
    if (result == CAPSCAN_PATCH_INSTALLED) {
        if (policy.verbose)
            report_patched(cls, via);
        if (!banner_printed)
            report_enabled();
        banner_printed = 1;
    } else if (result == CAPSCAN_PATCH_FAILED && !failure_printed) {
        report_failed(cls, reason ? reason : "hook installation failed");
        failure_printed = 1;
    }
    capscan_unlock(&lock);
    return device;
}

id capscan_entry_patch_device(id device)
{
    return patch_device(device, "the device factory");
}

static void patch_during_init(id device)
{
    patch_device(device, "-[" CAPSCAN_INIT_CLASS " " CAPSCAN_INIT_SELECTOR "]");
}

int capscan_entry_install_init_hook(void)
{
    enum capscan_init_hook_result result;

    if (!ready())
        return 0;
    result = capscan_runtime_hook_init(objc_lookUpClass(CAPSCAN_INIT_CLASS), CAPSCAN_INIT_SELECTOR,
                                       patch_during_init);
    __atomic_store_n(&init_hooked, result == CAPSCAN_INIT_HOOKED, __ATOMIC_RELEASE);
    if (policy.verbose) {
        static const char *const why[] = {
            ": hooked -[" CAPSCAN_INIT_CLASS " " CAPSCAN_INIT_SELECTOR "] (the published shims' hook point); "
            "the device factories are the fallback",
            ": no " CAPSCAN_INIT_CLASS " class; patching devices as the device factories return them",
            ": " CAPSCAN_INIT_CLASS " has no " CAPSCAN_INIT_SELECTOR "; patching devices as the device factories "
            "return them",
            ": the runtime refused the " CAPSCAN_INIT_SELECTOR " hook; patching devices as the device factories "
            "return them",
        };
        report_line("hook point in ", why[result]);
    }
    return result == CAPSCAN_INIT_HOOKED;
}

void capscan_entry_report_interposing(int interposed)
{
    int hooked = __atomic_load_n(&init_hooked, __ATOMIC_ACQUIRE);

    if (interposed || !__atomic_load_n(&initialised, __ATOMIC_ACQUIRE))
        return;
    /* Unasked, only when it decides the outcome (an active policy with no init
     * hook: answers stay stock).  With the hook in place devices are still
     * patched and the banner says so; an inert policy changes nothing anyway. */
    if ((!capscan_policy_active(&policy) || hooked) && !policy.verbose)
        return;
    if (hooked)
        report_line("interposing is disabled in ", ": MTLCreateSystemDefaultDevice is not capscan's wrapper "
                    "(the loader did not apply __interpose); devices are still patched through -["
                    CAPSCAN_INIT_CLASS " " CAPSCAN_INIT_SELECTOR "]");
    else
        report_line("interposing is disabled in ", ": MTLCreateSystemDefaultDevice is not capscan's wrapper "
                    "(the loader did not apply __interpose) and there is no -[" CAPSCAN_INIT_CLASS " "
                    CAPSCAN_INIT_SELECTOR "] to hook; Metal answers stay stock");
}

id capscan_entry_patch_devices(id devices)
{
    unsigned long i, count;

    if (!devices || !ready())
        return devices;
    if (!capscan_responds(devices, "count") || !capscan_responds(devices, "objectAtIndex:"))
        return devices;
    count = capscan_send_ulong(devices, "count");
    for (i = 0; i < count; i++)
        capscan_entry_patch_device(capscan_send_id_ulong(devices, "objectAtIndex:", i));
    return devices;
}

void capscan_entry_reset(void)
{
    capscan_runtime_unhook_init();
    capscan_runtime_reset();
    capscan_lock(&lock);
    initialised = banner_printed = failure_printed = init_hooked = scrubbed = 0;
    capscan_unlock(&lock);
}
