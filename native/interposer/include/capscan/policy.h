/* Policy core: reads the environment once and decides every answer.
 *
 * Freestanding C (no libc calls): the environment arrives through a
 * getenv-like callback so the same file builds for Linux, for macOS with
 * the SDK and for macOS without it. */
#ifndef CAPSCAN_POLICY_H
#define CAPSCAN_POLICY_H

#define CAPSCAN_APPLE_FAMILY_MIN 1001L    /* MTLGPUFamilyApple1 */
#define CAPSCAN_APPLE_FAMILY_MAX 1999L    /* last code of the Apple range */
#define CAPSCAN_TG_FLOOR_MAX 1048576UL    /* sanity bound for the floor (1 MiB) */

#define CAPSCAN_ENV_FAMILY "CAPSCAN_METAL_APPLE_FAMILY_MAX"
#define CAPSCAN_ENV_FAMILY_LUME "LUME_METAL_APPLE_FAMILY_MAX"
#define CAPSCAN_ENV_FAMILY_TART "TART_METAL_APPLE_FAMILY_MAX"
#define CAPSCAN_ENV_TG_FLOOR "CAPSCAN_METAL_MAX_THREADGROUP_MEMORY"
#define CAPSCAN_ENV_VERBOSE "CAPSCAN_INTERPOSER_VERBOSE"
#define CAPSCAN_ENV_SCRUB "CAPSCAN_INTERPOSER_SCRUB"
/* CAPSCAN_INTERPOSER_SCRUB values: "1" drops the library from the injection
 * variable as soon as it loads; "device" only once this process asks Metal
 * for a device, so a launcher that re-execs the real program (framework
 * Python's bin/python3.x, `uv run`) passes it on, and the program that does
 * the GPU work drops it.  Anything else: no scrub. */
#define CAPSCAN_SCRUB_OFF 0
#define CAPSCAN_SCRUB_AT_LOAD 1
#define CAPSCAN_SCRUB_AT_DEVICE 2

typedef const char *(*capscan_getenv_fn)(const char *name);

enum capscan_policy_status {
    CAPSCAN_POLICY_ACTIVE = 0,
    CAPSCAN_POLICY_UNSET,        /* none of the family variables is defined */
    CAPSCAN_POLICY_EMPTY,        /* the deciding family variable is empty */
    CAPSCAN_POLICY_BAD_FAMILY,   /* malformed or outside 1001-1999 */
    CAPSCAN_POLICY_BAD_TG_FLOOR  /* floor set but malformed or out of range */
};

struct capscan_policy {
    enum capscan_policy_status status;
    long apple_family_max;      /* valid only when active */
    unsigned long tg_floor;     /* 0: leave threadgroup memory as reported */
    const char *variable;       /* the variable that decided the status, or 0 */
    const char *value;          /* its value (for diagnostics), or 0 */
    int verbose;                /* CAPSCAN_INTERPOSER_VERBOSE=1 */
    int scrub;                  /* CAPSCAN_SCRUB_*: when children stop inheriting the library */
};

enum capscan_answer {
    CAPSCAN_PASS_THROUGH = 0,   /* ask the real implementation */
    CAPSCAN_ANSWER_YES = 1
};

/* Parse "[1-9][0-9]*", "0" or "0x<hex>" into *out; 1 on success, 0 when
 * the text is malformed or the value exceeds max (overflow-safe). */
int capscan_parse_uint(const char *text, unsigned long max, unsigned long *out);

void capscan_policy_from_env(struct capscan_policy *policy, capscan_getenv_fn env);
int capscan_policy_active(const struct capscan_policy *policy);

/* The answer for supportsFamily:(family).  Only Apple codes up to the cap
 * are ever forced; Mac, Common, Metal3/Metal4 and anything else pass. */
enum capscan_answer capscan_policy_family(const struct capscan_policy *policy, long family);

/* maxThreadgroupMemoryLength as it should be reported. */
unsigned long capscan_policy_tg_memory(const struct capscan_policy *policy, unsigned long reported);

/* Short English reason for an inactive policy, e.g. "is not set". */
const char *capscan_policy_status_text(enum capscan_policy_status status);

#endif
