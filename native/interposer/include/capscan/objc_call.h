/* Sending messages through the runtime's C API: look the IMP up with
 * class_getMethodImplementation and call it with the method's real type.
 * Works on Apple's runtime and on GCC's (which has no objc_msgSend).
 * Callers check capscan_responds() first: an unknown selector would reach
 * the forwarding machinery, which aborts without Foundation. */
#ifndef CAPSCAN_OBJC_CALL_H
#define CAPSCAN_OBJC_CALL_H

#include "capscan/objc_abi.h"

int capscan_responds(id object, const char *selector);
BOOL capscan_send_bool(id object, const char *selector);
BOOL capscan_send_bool_long(id object, const char *selector, long arg);
unsigned long capscan_send_ulong(id object, const char *selector);
unsigned long long capscan_send_u64(id object, const char *selector);
id capscan_send_id(id object, const char *selector);
id capscan_send_id_ulong(id object, const char *selector, unsigned long arg);
const char *capscan_send_cstr(id object, const char *selector);

#endif
