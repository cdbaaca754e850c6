/* The Objective-C runtime's C API, and nothing else.
 *
 * With an SDK (macOS) or GCC's libobjc (Linux) the real <objc/runtime.h> is
 * used.  For the SDK-less macOS cross build (-DCAPSCAN_NO_SDK) the few
 * functions capscan needs are declared here with Apple's ABI. */
#ifndef CAPSCAN_OBJC_ABI_H
#define CAPSCAN_OBJC_ABI_H

#if defined(CAPSCAN_NO_SDK)
typedef struct objc_class *Class;
typedef struct objc_object *id;
typedef struct objc_selector *SEL;
typedef struct objc_method *Method;
typedef void (*IMP)(void);
#if defined(__arm64__) || defined(__aarch64__)
typedef _Bool BOOL;
#else
typedef signed char BOOL;
#endif
Class object_getClass(id object);
const char *class_getName(Class cls);
Method class_getInstanceMethod(Class cls, SEL name);
IMP class_getMethodImplementation(Class cls, SEL name);
BOOL class_addMethod(Class cls, SEL name, IMP imp, const char *types);
IMP method_getImplementation(Method method);
IMP method_setImplementation(Method method, IMP imp);
const char *method_getTypeEncoding(Method method);
SEL sel_registerName(const char *name);
Class objc_lookUpClass(const char *name);
#else
#include <objc/runtime.h>
#endif

/* IMP is id(*)(id, SEL, ...) on GNU runtimes and void(*)(void) on Apple's;
 * casting through a plain function pointer keeps -Wcast-function-type quiet
 * and is what Apple's headers expect (call through a correctly typed
 * pointer). */
typedef void (*capscan_fnptr)(void);
#define CAPSCAN_IMP(fn) ((IMP)(capscan_fnptr)(fn))
#define CAPSCAN_CALLABLE(type, imp) ((type)(capscan_fnptr)(imp))

#endif
