/* libfakemetal.so: fake Metal device classes and factory functions. */
#include <stdlib.h>
#include <string.h>
#include <objc/runtime.h>

#include "fake_metal.h"

struct profile {
    const char *name;
    long families[16];          /* supported codes, 0-terminated */
    unsigned long tg_memory;
    unsigned long long working_set;
    BOOL unified;
};

static const struct profile paravirtual = {
    "Apple Paravirtual device",
    {1001, 1002, 1003, 1004, 1005, 2002, 3001, 3002, 3003, 0},
    32768, 11453251584ULL, YES
};

static const struct profile m1_ultra = {
    "Apple M1 Ultra",
    {1001, 1002, 1003, 1004, 1005, 1006, 1007, 2002, 3001, 3002, 3003, 5001, 5002, 0},
    32768, 115448725504ULL, YES
};

@implementation FakeMTLObject
+ (id)new
{
    return class_createInstance(self, 0);
}
@end

@implementation FakeMTLString
+ (id)stringWithUTF8:(const char *)text
{
    FakeMTLString *s = [self new];
    s->utf8 = text;
    return s;
}
- (const char *)UTF8String
{
    return utf8;
}
@end

@implementation FakeMTLArray
- (unsigned long)count
{
    return n;
}
- (id)objectAtIndex:(unsigned long)index
{
    return index < n ? items[index] : nil;
}
@end

@implementation _MTLDevice
- (void)initGPUFamilySupport
{
    family_support_initialised = 1;
}
- (id)name
{
    return [FakeMTLString stringWithUTF8:((const struct profile *)profile)->name];
}
- (BOOL)supportsFamily:(long)family
{
    const long *f;
    for (f = ((const struct profile *)profile)->families; *f; f++)
        if (*f == family)
            return YES;
    return NO;
}
- (unsigned long)maxThreadgroupMemoryLength
{
    return ((const struct profile *)profile)->tg_memory;
}
- (unsigned long long)recommendedMaxWorkingSetSize
{
    return ((const struct profile *)profile)->working_set;
}
- (BOOL)hasUnifiedMemory
{
    return ((const struct profile *)profile)->unified;
}
- (unsigned long long)registryID
{
    return 4242;
}
@end

/* Concrete classes: everything inherited from the base. */
@interface FakeMTLParavirtualDevice : _MTLDevice
@end
@implementation FakeMTLParavirtualDevice
@end

@interface FakeMTLHostDevice : _MTLDevice
@end
@implementation FakeMTLHostDevice
@end

/* A device class with no maxThreadgroupMemoryLength at all. */
@interface FakeMTLIncompleteDevice : FakeMTLObject
{
@public
    const void *profile;
}
- (id)name;
- (BOOL)supportsFamily:(long)family;
- (unsigned long long)recommendedMaxWorkingSetSize;
- (BOOL)hasUnifiedMemory;
@end
@implementation FakeMTLIncompleteDevice
- (id)name
{
    return [FakeMTLString stringWithUTF8:((const struct profile *)profile)->name];
}
- (BOOL)supportsFamily:(long)family
{
    const long *f;
    for (f = ((const struct profile *)profile)->families; *f; f++)
        if (*f == family)
            return YES;
    return NO;
}
- (unsigned long long)recommendedMaxWorkingSetSize
{
    return ((const struct profile *)profile)->working_set;
}
- (BOOL)hasUnifiedMemory
{
    return ((const struct profile *)profile)->unified;
}
@end

static id make_device(void)
{
    const char *kind = getenv("CAPSCAN_FAKE_METAL_DEVICE");
    _MTLDevice *device;

    if (!kind || !*kind || strcmp(kind, "paravirtual") == 0) {
        device = [FakeMTLParavirtualDevice new];
        device->profile = &paravirtual;
    } else if (strcmp(kind, "paravirtual-no-init") == 0) {
        device = [FakeMTLParavirtualDevice new];
        device->profile = &paravirtual;
        return device;
    } else if (strcmp(kind, "m1-ultra") == 0) {
        device = [FakeMTLHostDevice new];
        device->profile = &m1_ultra;
    } else if (strcmp(kind, "incomplete") == 0) {
        FakeMTLIncompleteDevice *odd = [FakeMTLIncompleteDevice new];
        odd->profile = &paravirtual;
        return odd;
    } else {
        return nil;   /* "none", or anything unknown */
    }
    [device initGPUFamilySupport];   /* as Metal does while creating a device */
    return device;
}

id FakeMTLCreateDeviceInternally(void)
{
    return make_device();
}

id MTLCreateSystemDefaultDevice(void)
{
    return make_device();
}

id MTLCopyAllDevices(void)
{
    FakeMTLArray *all = [FakeMTLArray new];
    id device = make_device();
    if (device)
        all->items[all->n++] = device;
    return all;
}
