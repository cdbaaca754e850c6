/* libfakemetal: a stand-in for Metal.framework on Linux (GCC libobjc).
 *
 * CAPSCAN_FAKE_METAL_DEVICE selects what MTLCreateSystemDefaultDevice and
 * MTLCopyAllDevices return:
 *   paravirtual (default)  "Apple Paravirtual device": Apple1-5, Mac2 and
 *                          Common1-3 true; Apple6+, Metal3/4 false; 32 KiB
 *   m1-ultra               a bare-metal host: Apple1-7, Mac2, Common1-3,
 *                          Metal3 and Metal4 true
 *   incomplete             paravirtual answers from a class that lacks
 *                          maxThreadgroupMemoryLength
 *   paravirtual-no-init    paravirtual, but created without calling
 *                          -initGPUFamilySupport (the init hook never fires)
 *   none                   no device (nil, empty array)
 *
 * Like Metal's, the concrete device classes inherit from a private base
 * class _MTLDevice, and every factory calls -[_MTLDevice
 * initGPUFamilySupport] while it creates the device (the hook point of the
 * published shims). */
#ifndef CAPSCAN_FAKE_METAL_H
#define CAPSCAN_FAKE_METAL_H

#include <objc/objc.h>

__attribute__((objc_root_class))
@interface FakeMTLObject
{
    Class isa;
}
+ (id)new;
@end

@interface FakeMTLString : FakeMTLObject
{
@public
    const char *utf8;
}
+ (id)stringWithUTF8:(const char *)text;
- (const char *)UTF8String;
@end

@interface FakeMTLArray : FakeMTLObject
{
@public
    id items[4];
    unsigned long n;
}
- (unsigned long)count;
- (id)objectAtIndex:(unsigned long)index;
@end

/* The private base class: the concrete device classes inherit all of
 * these, like Metal's concrete devices inherit from _MTLDevice. */
@interface _MTLDevice : FakeMTLObject
{
@public
    const void *profile;
    int family_support_initialised;
}
- (void)initGPUFamilySupport;
- (id)name;
- (BOOL)supportsFamily:(long)family;
- (unsigned long)maxThreadgroupMemoryLength;
- (unsigned long long)recommendedMaxWorkingSetSize;
- (BOOL)hasUnifiedMemory;
- (unsigned long long)registryID;
@end

id MTLCreateSystemDefaultDevice(void);
id MTLCopyAllDevices(void);
/* A device a framework creates for itself, without the two public factory
 * functions (which capscan interposes): only the init hook can reach it. */
id FakeMTLCreateDeviceInternally(void);

#endif
