/* Runtime layer: installs the capability hooks on a device class using only
 * the Objective-C runtime's C API.
 *
 * - supportsFamily: is always hooked; maxThreadgroupMemoryLength only when
 *   the policy has a threadgroup floor.  No other selector is touched.
 * - Hooks go on the concrete class itself: an inherited method gets an
 *   override added on the class (superclass and siblings keep their
 *   answers); a method the class owns has its implementation replaced.
 * - Idempotent: a selector whose current implementation is already one of
 *   capscan's hooks (installed on the class or inherited) is left alone.
 * - All or nothing, process-wide: if any hook cannot be installed, every
 *   hook installed so far is rolled back, and later calls refuse to patch.
 * - Thread-safe (one spinlock around installation). */
#ifndef CAPSCAN_RUNTIME_H
#define CAPSCAN_RUNTIME_H

#include "capscan/objc_abi.h"
#include "capscan/policy.h"

#define CAPSCAN_MAX_DEVICE_CLASSES 4

enum capscan_patch_result {
    CAPSCAN_PATCH_INSTALLED,  /* hooks installed on this class now */
    CAPSCAN_PATCH_ALREADY,    /* every needed selector already hooked */
    CAPSCAN_PATCH_INERT,      /* policy inactive: nothing done */
    CAPSCAN_PATCH_FAILED      /* nothing hooked anywhere; *reason says why */
};

/* The policy is copied on the first installation and used by all hooks.
 * reason (may be 0) receives a static string on failure. */
enum capscan_patch_result capscan_runtime_patch_class(Class cls, const struct capscan_policy *policy,
                                                      const char **reason);

/* The hook point the published shims (Lume, Tart, Anka) use: Metal calls
 * -[_MTLDevice initGPUFamilySupport] while it creates a device, before the
 * device is handed to anyone. */
#define CAPSCAN_INIT_CLASS "_MTLDevice"
#define CAPSCAN_INIT_SELECTOR "initGPUFamilySupport"

enum capscan_init_hook_result {
    CAPSCAN_INIT_HOOKED,      /* installed (now or earlier) */
    CAPSCAN_INIT_NO_CLASS,    /* cls is nil: no such class in this process */
    CAPSCAN_INIT_NO_METHOD,   /* the class has no such method */
    CAPSCAN_INIT_REFUSED      /* the runtime refused; nothing changed */
};

/* Hook -[cls selector] (an override added on cls when the method is
 * inherited, cls's own implementation replaced otherwise).  Every call of the
 * hook first calls on_init(self), then the original implementation, and
 * returns what it returned.  Once per process: later calls return HOOKED. */
enum capscan_init_hook_result capscan_runtime_hook_init(Class cls, const char *selector, void (*on_init)(id self));

/* Roll back every hook and forget all state (tests use this between cases). */
void capscan_runtime_reset(void);

/* Undo capscan_runtime_hook_init (tests use this between cases). */
void capscan_runtime_unhook_init(void);

/* Non-zero when imp is one of capscan's hook functions. */
int capscan_runtime_is_hook(IMP imp);

#endif
