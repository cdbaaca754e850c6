/* Message sends through class_getMethodImplementation (see objc_call.h). */
#include "capscan/objc_call.h"

static IMP lookup(id object, const char *selector, SEL *sel)
{
    *sel = sel_registerName(selector);
    return class_getMethodImplementation(object_getClass(object), *sel);
}

int capscan_responds(id object, const char *selector)
{
    return object && class_getInstanceMethod(object_getClass(object), sel_registerName(selector)) != 0;
}

BOOL capscan_send_bool(id object, const char *selector)
{
    typedef BOOL (*fn)(id, SEL);
    SEL sel;
    IMP imp = lookup(object, selector, &sel);
    return CAPSCAN_CALLABLE(fn, imp)(object, sel);
}

BOOL capscan_send_bool_long(id object, const char *selector, long arg)
{
    typedef BOOL (*fn)(id, SEL, long);
    SEL sel;
    IMP imp = lookup(object, selector, &sel);
    return CAPSCAN_CALLABLE(fn, imp)(object, sel, arg);
}

unsigned long capscan_send_ulong(id object, const char *selector)
{
    typedef unsigned long (*fn)(id, SEL);
    SEL sel;
    IMP imp = lookup(object, selector, &sel);
    return CAPSCAN_CALLABLE(fn, imp)(object, sel);
}

unsigned long long capscan_send_u64(id object, const char *selector)
{
    typedef unsigned long long (*fn)(id, SEL);
    SEL sel;
    IMP imp = lookup(object, selector, &sel);
    return CAPSCAN_CALLABLE(fn, imp)(object, sel);
}

id capscan_send_id(id object, const char *selector)
{
    typedef id (*fn)(id, SEL);
    SEL sel;
    IMP imp = lookup(object, selector, &sel);
    return CAPSCAN_CALLABLE(fn, imp)(object, sel);
}

id capscan_send_id_ulong(id object, const char *selector, unsigned long arg)
{
    typedef id (*fn)(id, SEL, unsigned long);
    SEL sel;
    IMP imp = lookup(object, selector, &sel);
    return CAPSCAN_CALLABLE(fn, imp)(object, sel, arg);
}

const char *capscan_send_cstr(id object, const char *selector)
{
    typedef const char *(*fn)(id, SEL);
    SEL sel;
    IMP imp = lookup(object, selector, &sel);
    return CAPSCAN_CALLABLE(fn, imp)(object, sel);
}
