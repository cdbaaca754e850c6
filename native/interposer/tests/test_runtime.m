/* Runtime layer against GCC's Objective-C runtime, with stand-in device
 * classes.  Built with AddressSanitizer and UBSan by the Makefile.
 *
 * Class layout (mirrors Metal's: concrete classes inherit from a base):
 *   TRoot
 *   +- TDeviceBase        paravirtual answers (Apple1-5, Mac2, Common1-3, 32 KiB)
 *   |  +- TConcrete       inherits everything: gets overrides added
 *   |  |  +- TSubOverride own supportsFamily:/maxThreadgroupMemoryLength calling super
 *   |  +- TSibling        must never change
 *   +- THost              owns its methods (replaced in place); Apple1-10, Metal3/4
 *   +- TNoTG              no maxThreadgroupMemoryLength
 *   +- TNoFamily          no supportsFamily:
 *   +- TExtra1..4         for the class-slot limit */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <objc/runtime.h>

#include "capscan/objc_call.h"
#include "capscan/policy.h"
#include "capscan/runtime.h"
#include "check.h"

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

static BOOL paravirtual_supports(long f)
{
    return (f >= 1001 && f <= 1005) || f == 2002 || (f >= 3001 && f <= 3003);
}

@interface TDeviceBase : TRoot
- (BOOL)supportsFamily:(long)family;
- (unsigned long)maxThreadgroupMemoryLength;
- (unsigned long long)registryID;
@end
@implementation TDeviceBase
- (BOOL)supportsFamily:(long)family
{
    return paravirtual_supports(family);
}
- (unsigned long)maxThreadgroupMemoryLength
{
    return 32768;
}
- (unsigned long long)registryID
{
    return 7;
}
@end

@interface TConcrete : TDeviceBase
@end
@implementation TConcrete
@end

@interface TSibling : TDeviceBase
@end
@implementation TSibling
@end

@interface TSubOverride : TConcrete
@end
@implementation TSubOverride
- (BOOL)supportsFamily:(long)family
{
    return [super supportsFamily:family] || family == 1009;
}
- (unsigned long)maxThreadgroupMemoryLength
{
    return [super maxThreadgroupMemoryLength] / 2;
}
@end

@interface THost : TRoot
- (BOOL)supportsFamily:(long)family;
- (unsigned long)maxThreadgroupMemoryLength;
@end
@implementation THost
- (BOOL)supportsFamily:(long)family
{
    return (family >= 1001 && family <= 1010) || family == 2002 || (family >= 3001 && family <= 3003) ||
           family == 5001 || family == 5002;
}
- (unsigned long)maxThreadgroupMemoryLength
{
    return 32768;
}
@end

@interface TNoTG : TRoot
- (BOOL)supportsFamily:(long)family;
@end
@implementation TNoTG
- (BOOL)supportsFamily:(long)family
{
    return paravirtual_supports(family);
}
@end

@interface TNoFamily : TRoot
- (unsigned long)maxThreadgroupMemoryLength;
@end
@implementation TNoFamily
- (unsigned long)maxThreadgroupMemoryLength
{
    return 32768;
}
@end

#define EXTRA_CLASS(name)                                                      \
    @interface name : TRoot                                                    \
    - (BOOL)supportsFamily:(long)family;                                       \
    @end                                                                       \
    @implementation name                                                       \
    - (BOOL)supportsFamily:(long)family                                        \
    {                                                                          \
        return paravirtual_supports(family);                                   \
    }                                                                          \
    @end
EXTRA_CLASS(TExtra1)
EXTRA_CLASS(TExtra2)
EXTRA_CLASS(TExtra3)
EXTRA_CLASS(TExtra4)

/* ------------------------------------------------------------------ */

static const char *const *fake_env;

static const char *lookup(const char *name)
{
    const char *const *p;
    for (p = fake_env; p && *p; p += 2)
        if (strcmp(p[0], name) == 0)
            return p[1];
    return NULL;
}

static struct capscan_policy policy_for(const char *family, const char *floor)
{
    const char *env[] = {CAPSCAN_ENV_FAMILY, family, CAPSCAN_ENV_TG_FLOOR, floor, NULL};
    struct capscan_policy policy;
    if (!family)
        env[0] = NULL;
    else if (!floor)
        env[2] = NULL;
    fake_env = env;
    capscan_policy_from_env(&policy, lookup);
    return policy;
}

static IMP imp_of(Class cls, const char *selector)
{
    return class_getMethodImplementation(cls, sel_registerName(selector));
}

static Method own_method(Class cls, const char *selector)
{
    unsigned n, i;
    Method found = NULL;
    Method *list = class_copyMethodList(cls, &n);
    for (i = 0; i < n; i++)
        if (strcmp(sel_getName(method_getName(list[i])), selector) == 0)
            found = list[i];
    free(list);
    return found;
}

/* Answers of a device instance, sent as real messages (method caches). */
static int answers_stock_paravirtual(id dev)
{
    long f;
    for (f = 1001; f <= 1012; f++)
        if ([dev supportsFamily:f] != paravirtual_supports(f))
            return 0;
    return [dev supportsFamily:5001] == NO && [dev supportsFamily:5002] == NO &&
           [dev maxThreadgroupMemoryLength] == 32768;
}

static id base, concrete, sibling;

static void test_inert_policy_changes_nothing(void)
{
    struct capscan_policy p = policy_for(NULL, NULL);
    IMP before = imp_of([TConcrete class], "supportsFamily:");

    CHECK(answers_stock_paravirtual(concrete));   /* also warms the caches */
    CHECK(capscan_runtime_patch_class([TConcrete class], &p, NULL) == CAPSCAN_PATCH_INERT);
    p = policy_for("1007junk", NULL);
    CHECK(capscan_runtime_patch_class([TConcrete class], &p, NULL) == CAPSCAN_PATCH_INERT);
    CHECK(imp_of([TConcrete class], "supportsFamily:") == before);
    CHECK(own_method([TConcrete class], "supportsFamily:") == NULL);
    CHECK(answers_stock_paravirtual(concrete));
}

static void test_patch_inherited_methods(void)
{
    struct capscan_policy p = policy_for("1007", NULL);
    IMP tg_before = imp_of([TConcrete class], "maxThreadgroupMemoryLength");
    IMP base_before = imp_of([TDeviceBase class], "supportsFamily:");
    long f;

    CHECK(answers_stock_paravirtual(concrete));
    CHECK(capscan_runtime_patch_class([TConcrete class], &p, NULL) == CAPSCAN_PATCH_INSTALLED);
    for (f = 1001; f <= 1007; f++)
        CHECK([concrete supportsFamily:f] == YES);
    for (f = 1008; f <= 1012; f++)
        CHECK([concrete supportsFamily:f] == NO);
    CHECK([concrete supportsFamily:2002] == YES);   /* passed through */
    CHECK([concrete supportsFamily:2001] == NO);
    CHECK([concrete supportsFamily:3003] == YES);
    CHECK([concrete supportsFamily:3004] == NO);
    CHECK([concrete supportsFamily:5001] == NO);    /* never Metal3 */
    CHECK([concrete supportsFamily:5002] == NO);    /* never Metal4 */
    /* no floor: threadgroup memory not even hooked */
    CHECK([concrete maxThreadgroupMemoryLength] == 32768);
    CHECK(imp_of([TConcrete class], "maxThreadgroupMemoryLength") == tg_before);
    CHECK(own_method([TConcrete class], "maxThreadgroupMemoryLength") == NULL);
    CHECK([concrete registryID] == 7);
    /* the override lives on the concrete class only */
    CHECK(own_method([TConcrete class], "supportsFamily:") != NULL);
    CHECK(imp_of([TDeviceBase class], "supportsFamily:") == base_before);
    CHECK(answers_stock_paravirtual(base));
    CHECK(answers_stock_paravirtual(sibling));
    /* the runtime-layer message helpers see the same answers */
    CHECK(capscan_responds(concrete, "supportsFamily:"));
    CHECK(!capscan_responds(concrete, "noSuchSelector"));
    CHECK(capscan_send_bool_long(concrete, "supportsFamily:", 1007) == YES);
    CHECK(capscan_send_bool_long(sibling, "supportsFamily:", 1007) == NO);
    CHECK(capscan_send_ulong(concrete, "maxThreadgroupMemoryLength") == 32768);
    CHECK(capscan_send_u64(concrete, "registryID") == 7);
}

static void test_install_is_idempotent(void)
{
    struct capscan_policy p = policy_for("1007", NULL);
    IMP installed = imp_of([TConcrete class], "supportsFamily:");
    Class later;
    id kvo;

    CHECK(capscan_runtime_is_hook(installed));
    CHECK(capscan_runtime_patch_class([TConcrete class], &p, NULL) == CAPSCAN_PATCH_ALREADY);
    CHECK(capscan_runtime_patch_class([TConcrete class], &p, NULL) == CAPSCAN_PATCH_ALREADY);
    CHECK(imp_of([TConcrete class], "supportsFamily:") == installed);
    CHECK([concrete supportsFamily:1007] == YES && [concrete supportsFamily:1003] == YES);
    CHECK([concrete supportsFamily:1008] == NO);   /* no self-recursion, no double hook */

    /* a subclass created after patching (KVO does this) inherits the hook */
    later = objc_allocateClassPair([TConcrete class], "TLaterSubclass", 0);
    objc_registerClassPair(later);
    kvo = class_createInstance(later, 0);
    CHECK([kvo supportsFamily:1007] == YES && [kvo supportsFamily:5001] == NO);
    CHECK(capscan_runtime_patch_class(later, &p, NULL) == CAPSCAN_PATCH_ALREADY);
}

static void test_reset_restores_stock(void)
{
    capscan_runtime_reset();
    CHECK(answers_stock_paravirtual(concrete));
    CHECK(!capscan_runtime_is_hook(imp_of([TConcrete class], "supportsFamily:")));
    CHECK(imp_of([TConcrete class], "supportsFamily:") == imp_of([TDeviceBase class], "supportsFamily:"));
}

static void test_threadgroup_floor(void)
{
    struct capscan_policy p = policy_for("1007", "65536");
    id sub = [TSubOverride new];

    CHECK(capscan_runtime_patch_class([TConcrete class], &p, NULL) == CAPSCAN_PATCH_INSTALLED);
    CHECK([concrete maxThreadgroupMemoryLength] == 65536);
    CHECK([base maxThreadgroupMemoryLength] == 32768);
    CHECK([sibling maxThreadgroupMemoryLength] == 32768);
    /* TSubOverride halves super's 65536; its own method is hooked separately */
    CHECK([sub maxThreadgroupMemoryLength] == 32768);
    CHECK(capscan_runtime_patch_class([TSubOverride class], &p, NULL) == CAPSCAN_PATCH_INSTALLED);
    CHECK([sub maxThreadgroupMemoryLength] == 65536);
    /* its supportsFamily: calls super (another hook) without recursing */
    CHECK([sub supportsFamily:1007] == YES && [sub supportsFamily:1009] == YES);
    CHECK([sub supportsFamily:1008] == NO && [sub supportsFamily:5001] == NO);
    capscan_runtime_reset();
    CHECK([sub maxThreadgroupMemoryLength] == 16384 && [sub supportsFamily:1007] == NO);

    /* a floor below the reported value changes nothing */
    p = policy_for("1007", "16384");
    CHECK(capscan_runtime_patch_class([TConcrete class], &p, NULL) == CAPSCAN_PATCH_INSTALLED);
    CHECK([concrete maxThreadgroupMemoryLength] == 32768);
    capscan_runtime_reset();
    CHECK(answers_stock_paravirtual(concrete));
}

static void test_subclass_first_then_base(void)
{
    struct capscan_policy p = policy_for("1008", NULL);
    id sub = [TSubOverride new];

    CHECK(capscan_runtime_patch_class([TSubOverride class], &p, NULL) == CAPSCAN_PATCH_INSTALLED);
    CHECK(capscan_runtime_patch_class([TConcrete class], &p, NULL) == CAPSCAN_PATCH_INSTALLED);
    CHECK([sub supportsFamily:1008] == YES && [sub supportsFamily:1010] == NO);
    CHECK([concrete supportsFamily:1008] == YES && [concrete supportsFamily:1009] == NO);
    capscan_runtime_reset();
    CHECK([sub supportsFamily:1008] == NO && [sub supportsFamily:1009] == YES);
}

static void test_owned_methods_replaced_and_passed_through(void)
{
    struct capscan_policy p = policy_for("1007", "65536");
    id host = [THost new];
    IMP family_before = imp_of([THost class], "supportsFamily:");
    IMP tg_before = imp_of([THost class], "maxThreadgroupMemoryLength");

    CHECK(capscan_runtime_patch_class([THost class], &p, NULL) == CAPSCAN_PATCH_INSTALLED);
    CHECK([host supportsFamily:1010] == YES);   /* real answer above the cap kept */
    CHECK([host supportsFamily:1011] == NO);
    CHECK([host supportsFamily:5001] == YES);   /* real Metal3 passes through */
    CHECK([host supportsFamily:5002] == YES);
    CHECK([host maxThreadgroupMemoryLength] == 65536);
    capscan_runtime_reset();
    CHECK(imp_of([THost class], "supportsFamily:") == family_before);
    CHECK(imp_of([THost class], "maxThreadgroupMemoryLength") == tg_before);
    CHECK([host maxThreadgroupMemoryLength] == 32768);
}

static void test_partial_failure_rolls_back_everything(void)
{
    struct capscan_policy p = policy_for("1007", "65536");
    id notg = [TNoTG new];
    IMP notg_family = imp_of([TNoTG class], "supportsFamily:");
    const char *reason = NULL;

    CHECK([notg supportsFamily:1007] == NO);   /* warm cache */
    CHECK(capscan_runtime_patch_class([TConcrete class], &p, NULL) == CAPSCAN_PATCH_INSTALLED);
    CHECK([concrete supportsFamily:1007] == YES && [concrete maxThreadgroupMemoryLength] == 65536);
    /* TNoTG: supportsFamily: is hooked first, then maxThreadgroupMemoryLength
     * is missing: both classes must end up fully stock */
    CHECK(capscan_runtime_patch_class([TNoTG class], &p, &reason) == CAPSCAN_PATCH_FAILED);
    CHECK(reason && strstr(reason, "maxThreadgroupMemoryLength") != NULL);
    CHECK(imp_of([TNoTG class], "supportsFamily:") == notg_family);
    CHECK([notg supportsFamily:1007] == NO && [notg supportsFamily:1005] == YES);
    CHECK(answers_stock_paravirtual(concrete));
    CHECK(!capscan_runtime_is_hook(imp_of([TConcrete class], "supportsFamily:")));
    CHECK(!capscan_runtime_is_hook(imp_of([TConcrete class], "maxThreadgroupMemoryLength")));
    /* and the process stays closed afterwards */
    reason = NULL;
    CHECK(capscan_runtime_patch_class([TConcrete class], &p, &reason) == CAPSCAN_PATCH_FAILED);
    CHECK(reason && strstr(reason, "earlier") != NULL);
    CHECK(answers_stock_paravirtual(concrete));
    capscan_runtime_reset();

    /* without a floor only supportsFamily: is needed, so TNoTG is fine */
    p = policy_for("1007", NULL);
    CHECK(capscan_runtime_patch_class([TNoTG class], &p, NULL) == CAPSCAN_PATCH_INSTALLED);
    CHECK([notg supportsFamily:1007] == YES);
    capscan_runtime_reset();
    CHECK([notg supportsFamily:1007] == NO);
}

static void test_missing_supports_family_and_nil_class(void)
{
    struct capscan_policy p = policy_for("1007", NULL);
    const char *reason = NULL;

    CHECK(capscan_runtime_patch_class([TNoFamily class], &p, &reason) == CAPSCAN_PATCH_FAILED);
    CHECK(reason && strstr(reason, "supportsFamily:") != NULL);
    capscan_runtime_reset();
    CHECK(capscan_runtime_patch_class(Nil, &p, NULL) == CAPSCAN_PATCH_FAILED);
    capscan_runtime_reset();
}

static void test_class_limit(void)
{
    struct capscan_policy p = policy_for("1007", NULL);
    Class extras[] = {[TExtra1 class], [TExtra2 class], [TExtra3 class], [TExtra4 class]};
    id first = [TExtra1 new];
    unsigned i;

    for (i = 0; i < 4; i++)
        CHECK(capscan_runtime_patch_class(extras[i], &p, NULL) == CAPSCAN_PATCH_INSTALLED);
    CHECK([first supportsFamily:1007] == YES);
    CHECK(capscan_runtime_patch_class(extras[2], &p, NULL) == CAPSCAN_PATCH_ALREADY);
    CHECK(capscan_runtime_patch_class([TConcrete class], &p, NULL) == CAPSCAN_PATCH_FAILED);
    CHECK([first supportsFamily:1007] == NO);
    CHECK(answers_stock_paravirtual(concrete));
    capscan_runtime_reset();
}

static struct capscan_policy thread_policy;
static int thread_results[8];

static void *patch_from_thread(void *arg)
{
    int *slot = arg;
    *slot = capscan_runtime_patch_class([TConcrete class], &thread_policy, NULL);
    return NULL;
}

static void test_concurrent_install_happens_once(void)
{
    pthread_t threads[8];
    int i, installed = 0, already = 0;

    thread_policy = policy_for("1007", "65536");
    for (i = 0; i < 8; i++)
        pthread_create(&threads[i], NULL, patch_from_thread, &thread_results[i]);
    for (i = 0; i < 8; i++)
        pthread_join(threads[i], NULL);
    for (i = 0; i < 8; i++) {
        installed += thread_results[i] == CAPSCAN_PATCH_INSTALLED;
        already += thread_results[i] == CAPSCAN_PATCH_ALREADY;
    }
    CHECK(installed == 1 && already == 7);
    CHECK([concrete supportsFamily:1007] == YES && [concrete maxThreadgroupMemoryLength] == 65536);
    capscan_runtime_reset();
    CHECK(answers_stock_paravirtual(concrete));
}

int main(void)
{
    base = [TDeviceBase new];
    concrete = [TConcrete new];
    sibling = [TSibling new];

    test_inert_policy_changes_nothing();
    test_patch_inherited_methods();
    test_install_is_idempotent();
    test_reset_restores_stock();
    test_threadgroup_floor();
    test_subclass_first_then_base();
    test_owned_methods_replaced_and_passed_through();
    test_partial_failure_rolls_back_everything();
    test_missing_supports_family_and_nil_class();
    test_class_limit();
    test_concurrent_install_happens_once();
    return check_summary();
}
