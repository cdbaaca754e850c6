/* Policy core: environment parsing and the answer for each family code. */
#include "capscan/policy.h"

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int capscan_parse_uint(const char *text, unsigned long max, unsigned long *out)
{
    unsigned long value = 0, base = 10;
    const char *p = text;
    int digit;

    if (!p || !*p)
        return 0;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        base = 16;
        p += 2;
        if (!*p)
            return 0;
    } else if (p[0] == '0' && p[1] != '\0') {
        return 0;               /* "0755": octal or decimal? refuse to guess */
    }
    for (; *p; p++) {
        digit = hex_digit(*p);
        if (digit < 0 || (unsigned long)digit >= base)
            return 0;
        if (value > (max - (unsigned long)digit) / base)
            return 0;           /* would exceed max (and never overflows) */
        value = value * base + (unsigned long)digit;
    }
    *out = value;
    return 1;
}

static int is_one(const char *text)
{
    return text && text[0] == '1' && text[1] == '\0';
}

static int is_word(const char *text, const char *word)
{
    if (!text)
        return 0;
    for (; *word; text++, word++)
        if (*text != *word)
            return 0;
    return *text == '\0';
}

static int scrub_mode(const char *text)
{
    if (is_one(text))
        return CAPSCAN_SCRUB_AT_LOAD;
    return is_word(text, "device") ? CAPSCAN_SCRUB_AT_DEVICE : CAPSCAN_SCRUB_OFF;
}

/* CAPSCAN_ wins over LUME_, which wins over TART_.  The first variable that
 * is defined decides, even when it is empty or malformed: an explicit
 * CAPSCAN_METAL_APPLE_FAMILY_MAX= turns an inherited alias off. */
static const char *family_variable(capscan_getenv_fn env, const char **value)
{
    static const char *const names[] = {
        CAPSCAN_ENV_FAMILY, CAPSCAN_ENV_FAMILY_LUME, CAPSCAN_ENV_FAMILY_TART
    };
    unsigned i;

    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        *value = env(names[i]);
        if (*value)
            return names[i];
    }
    return 0;
}

void capscan_policy_from_env(struct capscan_policy *policy, capscan_getenv_fn env)
{
    const char *value = 0;
    unsigned long family = 0, floor = 0;

    policy->status = CAPSCAN_POLICY_UNSET;
    policy->apple_family_max = 0;
    policy->tg_floor = 0;
    policy->value = 0;
    policy->verbose = is_one(env(CAPSCAN_ENV_VERBOSE));
    policy->scrub = scrub_mode(env(CAPSCAN_ENV_SCRUB));
    policy->variable = family_variable(env, &value);
    if (!policy->variable)
        return;
    policy->value = value;
    if (!*value) {
        policy->status = CAPSCAN_POLICY_EMPTY;
        return;
    }
    if (!capscan_parse_uint(value, (unsigned long)CAPSCAN_APPLE_FAMILY_MAX, &family) ||
        family < (unsigned long)CAPSCAN_APPLE_FAMILY_MIN) {
        policy->status = CAPSCAN_POLICY_BAD_FAMILY;
        return;
    }

    value = env(CAPSCAN_ENV_TG_FLOOR);
    if (value && *value) {
        if (!capscan_parse_uint(value, CAPSCAN_TG_FLOOR_MAX, &floor) || floor == 0) {
            policy->status = CAPSCAN_POLICY_BAD_TG_FLOOR;
            policy->variable = CAPSCAN_ENV_TG_FLOOR;
            policy->value = value;
            return;
        }
    }
    policy->status = CAPSCAN_POLICY_ACTIVE;
    policy->apple_family_max = (long)family;
    policy->tg_floor = floor;
}

int capscan_policy_active(const struct capscan_policy *policy)
{
    return policy && policy->status == CAPSCAN_POLICY_ACTIVE;
}

enum capscan_answer capscan_policy_family(const struct capscan_policy *policy, long family)
{
    if (!capscan_policy_active(policy))
        return CAPSCAN_PASS_THROUGH;
    if (family >= CAPSCAN_APPLE_FAMILY_MIN && family <= policy->apple_family_max)
        return CAPSCAN_ANSWER_YES;
    return CAPSCAN_PASS_THROUGH;  /* Mac*, Common*, Metal3/4, higher Apple */
}

unsigned long capscan_policy_tg_memory(const struct capscan_policy *policy, unsigned long reported)
{
    if (!capscan_policy_active(policy) || reported >= policy->tg_floor)
        return reported;
    return policy->tg_floor;
}

const char *capscan_policy_status_text(enum capscan_policy_status status)
{
    switch (status) {
    case CAPSCAN_POLICY_ACTIVE:
        return "is active";
    case CAPSCAN_POLICY_UNSET:
        return "is not set";
    case CAPSCAN_POLICY_EMPTY:
        return "is empty";
    case CAPSCAN_POLICY_BAD_FAMILY:
        return "is not an Apple GPU family code in 1001-1999 (decimal or 0x hex)";
    case CAPSCAN_POLICY_BAD_TG_FLOOR:
        return "is not a byte count in 1-1048576 (decimal or 0x hex)";
    }
    return "is invalid";
}
