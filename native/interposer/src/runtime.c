/* Runtime layer: capability hooks on a device class (see runtime.h). */
#include "capscan/runtime.h"
#include "capscan/spinlock.h"

enum { HOOK_SUPPORTS_FAMILY, HOOK_TG_MEMORY, HOOK_COUNT };

static const char *const hook_selectors[HOOK_COUNT] = {
    "supportsFamily:", "maxThreadgroupMemoryLength"
};

/* Each hooked class gets its own slot, and each slot its own hook functions,
 * so a hook always calls the implementation it replaced on *its* class.
 * (Looking the original up from self's class would recurse when a subclass
 * with its own override calls super.) */
struct slot {
    Class cls;
    IMP original[HOOK_COUNT];
};

struct undo {
    Method method;
    IMP previous;
};

static struct slot slots[CAPSCAN_MAX_DEVICE_CLASSES];
static unsigned slots_used;
static struct undo journal[CAPSCAN_MAX_DEVICE_CLASSES * HOOK_COUNT];
static unsigned journal_len;
static struct capscan_policy policy;
static int failed;
static int lock;

typedef BOOL (*supports_family_fn)(id, SEL, long);
typedef unsigned long (*tg_memory_fn)(id, SEL);

static BOOL supports_family(unsigned n, id self, SEL cmd, long family)
{
    if (capscan_policy_family(&policy, family) == CAPSCAN_ANSWER_YES)
        return 1;
    return CAPSCAN_CALLABLE(supports_family_fn, slots[n].original[HOOK_SUPPORTS_FAMILY])(self, cmd, family);
}

static unsigned long tg_memory(unsigned n, id self, SEL cmd)
{
    unsigned long reported =
        CAPSCAN_CALLABLE(tg_memory_fn, slots[n].original[HOOK_TG_MEMORY])(self, cmd);
    return capscan_policy_tg_memory(&policy, reported);
}

#define CAPSCAN_SLOT_HOOKS(n)                                                  \
    static BOOL supports_family_##n(id self, SEL cmd, long family)             \
    {                                                                          \
        return supports_family(n, self, cmd, family);                          \
    }                                                                          \
    static unsigned long tg_memory_##n(id self, SEL cmd)                       \
    {                                                                          \
        return tg_memory(n, self, cmd);                                        \
    }

CAPSCAN_SLOT_HOOKS(0)
CAPSCAN_SLOT_HOOKS(1)
CAPSCAN_SLOT_HOOKS(2)
CAPSCAN_SLOT_HOOKS(3)

static IMP hook_imp(unsigned n, unsigned hook)
{
    static const capscan_fnptr table[CAPSCAN_MAX_DEVICE_CLASSES][HOOK_COUNT] = {
        {(capscan_fnptr)supports_family_0, (capscan_fnptr)tg_memory_0},
        {(capscan_fnptr)supports_family_1, (capscan_fnptr)tg_memory_1},
        {(capscan_fnptr)supports_family_2, (capscan_fnptr)tg_memory_2},
        {(capscan_fnptr)supports_family_3, (capscan_fnptr)tg_memory_3},
    };
    return CAPSCAN_IMP(table[n][hook]);
}

int capscan_runtime_is_hook(IMP imp)
{
    unsigned n, hook;

    for (n = 0; n < CAPSCAN_MAX_DEVICE_CLASSES; n++)
        for (hook = 0; hook < HOOK_COUNT; hook++)
            if (imp == hook_imp(n, hook))
                return 1;
    return 0;
}

static void roll_back(void)
{
    while (journal_len) {
        journal_len--;
        method_setImplementation(journal[journal_len].method, journal[journal_len].previous);
    }
}

/* Add an override on cls, or replace cls's own implementation.  Journals
 * the change; returns non-zero when cls now answers with hook. */
static int install(Class cls, SEL sel, Method current, IMP original, IMP hook)
{
    Method target = current;

    if (class_addMethod(cls, sel, hook, method_getTypeEncoding(current))) {
        /* Added: the new method previously "was" the inherited one. */
        target = class_getInstanceMethod(cls, sel);
        if (!target)
            return 0;
        journal[journal_len].method = target;
        journal[journal_len].previous = original;
        journal_len++;
    } else {
        journal[journal_len].method = target;
        journal[journal_len].previous = method_setImplementation(target, hook);
        journal_len++;
    }
    return class_getMethodImplementation(cls, sel) == hook;
}

static enum capscan_patch_result patch_locked(Class cls, const struct capscan_policy *wanted,
                                              const char **reason)
{
    unsigned hook, hooks_needed, installed = 0;
    struct slot *slot;

    if (failed) {
        *reason = "an earlier hook installation failed";
        return CAPSCAN_PATCH_FAILED;
    }
    if (!capscan_policy_active(wanted))
        return CAPSCAN_PATCH_INERT;
    if (!cls) {
        *reason = "device has no class";
        return CAPSCAN_PATCH_FAILED;
    }
    if (!slots_used && !journal_len)
        policy = *wanted;
    hooks_needed = policy.tg_floor ? HOOK_COUNT : 1;
    if (slots_used == CAPSCAN_MAX_DEVICE_CLASSES) {
        for (hook = 0; hook < hooks_needed; hook++) {
            Method m = class_getInstanceMethod(cls, sel_registerName(hook_selectors[hook]));
            if (!m || !capscan_runtime_is_hook(method_getImplementation(m)))
                break;
        }
        if (hook == hooks_needed)
            return CAPSCAN_PATCH_ALREADY;
        *reason = "too many distinct device classes";
        goto fail;
    }

    slot = &slots[slots_used];
    slot->cls = cls;
    for (hook = 0; hook < hooks_needed; hook++) {
        SEL sel = sel_registerName(hook_selectors[hook]);
        Method current = class_getInstanceMethod(cls, sel);
        IMP original;

        if (!current) {
            *reason = hook == HOOK_SUPPORTS_FAMILY ? "device class has no supportsFamily:"
                                                   : "device class has no maxThreadgroupMemoryLength";
            goto fail;
        }
        original = method_getImplementation(current);
        if (capscan_runtime_is_hook(original))
            continue;   /* already hooked here or on a superclass */
        slot->original[hook] = original;
        __atomic_thread_fence(__ATOMIC_RELEASE);
        if (!install(cls, sel, current, original, hook_imp(slots_used, hook))) {
            *reason = "the runtime refused to install a hook";
            goto fail;
        }
        installed++;
    }
    if (!installed) {
        slot->cls = 0;
        return CAPSCAN_PATCH_ALREADY;
    }
    slots_used++;
    return CAPSCAN_PATCH_INSTALLED;

fail:
    roll_back();
    failed = 1;
    return CAPSCAN_PATCH_FAILED;
}

enum capscan_patch_result capscan_runtime_patch_class(Class cls, const struct capscan_policy *wanted,
                                                      const char **reason)
{
    const char *ignored = 0;
    enum capscan_patch_result result;

    capscan_lock(&lock);
    result = patch_locked(cls, wanted, reason ? reason : &ignored);
    capscan_unlock(&lock);
    return result;
}

void capscan_runtime_reset(void)
{
    unsigned n, hook;

    capscan_lock(&lock);
    roll_back();
    for (n = 0; n < CAPSCAN_MAX_DEVICE_CLASSES; n++) {
        slots[n].cls = 0;
        for (hook = 0; hook < HOOK_COUNT; hook++)
            slots[n].original[hook] = 0;
    }
    slots_used = 0;
    failed = 0;
    capscan_unlock(&lock);
}

/* ---------------------------------------------------------------- init hook */

typedef void *(*init_fn)(id, SEL);

static struct {
    Method method;            /* the method now answering with init_hook */
    IMP original;             /* what it answered with before */
    void (*on_init)(id);
    int installed;
} init_state;
static int init_lock;

/* The private method's return type is not public: passing a pointer-sized
 * value through covers void and any integer or pointer result. */
static void *init_hook(id self, SEL cmd)
{
    IMP original = __atomic_load_n(&init_state.original, __ATOMIC_ACQUIRE);

    if (init_state.on_init)
        init_state.on_init(self);
    return original ? CAPSCAN_CALLABLE(init_fn, original)(self, cmd) : 0;
}

enum capscan_init_hook_result capscan_runtime_hook_init(Class cls, const char *selector, void (*on_init)(id self))
{
    enum capscan_init_hook_result result = CAPSCAN_INIT_HOOKED;
    IMP hook = CAPSCAN_IMP(init_hook);
    SEL sel;
    Method current;
    IMP original;

    if (!cls)
        return CAPSCAN_INIT_NO_CLASS;
    capscan_lock(&init_lock);
    if (init_state.installed)
        goto done;
    sel = sel_registerName(selector);
    current = class_getInstanceMethod(cls, sel);
    if (!current) {
        result = CAPSCAN_INIT_NO_METHOD;
        goto done;
    }
    original = method_getImplementation(current);
    if (original == hook) {
        init_state.installed = 1;
        goto done;
    }
    init_state.on_init = on_init;
    __atomic_store_n(&init_state.original, original, __ATOMIC_RELEASE);
    if (class_addMethod(cls, sel, hook, method_getTypeEncoding(current))) {
        init_state.method = class_getInstanceMethod(cls, sel);
    } else {
        init_state.method = current;
        method_setImplementation(current, hook);
    }
    /* (method_getImplementation, not class_getMethodImplementation: GCC's
     * runtime answers the latter from a dispatch table that a class never
     * messaged yet does not have.) */
    if (!init_state.method || method_getImplementation(class_getInstanceMethod(cls, sel)) != hook) {
        if (init_state.method)
            method_setImplementation(init_state.method, original);
        init_state.method = 0;
        result = CAPSCAN_INIT_REFUSED;
        goto done;
    }
    init_state.installed = 1;
done:
    capscan_unlock(&init_lock);
    return result;
}

void capscan_runtime_unhook_init(void)
{
    capscan_lock(&init_lock);
    if (init_state.installed && init_state.method)
        method_setImplementation(init_state.method, init_state.original);
    init_state.method = 0;
    init_state.on_init = 0;
    init_state.installed = 0;
    __atomic_store_n(&init_state.original, (IMP)0, __ATOMIC_RELEASE);
    capscan_unlock(&init_lock);
}
