/* Policy core, tested directly: environment parsing, aliases and their
 * precedence, malformed values, the family answers and the floor. */
#include <string.h>

#include "capscan/policy.h"
#include "capscan/scrub.h"
#include "check.h"

/* A fake environment: NULL-terminated name/value pairs. */
static const char *const *fake_env;

static const char *lookup(const char *name)
{
    const char *const *p;
    for (p = fake_env; p && *p; p += 2)
        if (strcmp(p[0], name) == 0)
            return p[1];
    return NULL;
}

static struct capscan_policy with_env(const char *const *env)
{
    struct capscan_policy policy;
    fake_env = env;
    capscan_policy_from_env(&policy, lookup);
    return policy;
}

static struct capscan_policy family_value(const char *value)
{
    const char *env[] = {CAPSCAN_ENV_FAMILY, value, NULL};
    return with_env(env);
}

static void test_parse_uint(void)
{
    unsigned long v = 0;
    CHECK(capscan_parse_uint("1007", 1999, &v) && v == 1007);
    CHECK(capscan_parse_uint("0x3e9", 1999, &v) && v == 1001);
    CHECK(capscan_parse_uint("0X3EF", 1999, &v) && v == 1007);
    CHECK(capscan_parse_uint("0", 1999, &v) && v == 0);
    CHECK(!capscan_parse_uint("", 1999, &v));
    CHECK(!capscan_parse_uint(NULL, 1999, &v));
    CHECK(!capscan_parse_uint("0x", 1999, &v));
    CHECK(!capscan_parse_uint("01007", 1999, &v));   /* octal-looking */
    CHECK(!capscan_parse_uint("-1007", 1999, &v));
    CHECK(!capscan_parse_uint("+1007", 1999, &v));
    CHECK(!capscan_parse_uint(" 1007", 1999, &v));
    CHECK(!capscan_parse_uint("1007 ", 1999, &v));
    CHECK(!capscan_parse_uint("1007junk", 1999, &v));
    CHECK(!capscan_parse_uint("0x3eg", 1999, &v));
    CHECK(!capscan_parse_uint("2000", 1999, &v));
    CHECK(capscan_parse_uint("1999", 1999, &v) && v == 1999);
    CHECK(!capscan_parse_uint("18446744073709551617", 1999, &v));
    CHECK(!capscan_parse_uint("99999999999999999999999999999999", ~0UL, &v));
    CHECK(capscan_parse_uint("18446744073709551615", ~0UL, &v) && v == ~0UL);
    CHECK(!capscan_parse_uint("18446744073709551616", ~0UL, &v));
    CHECK(!capscan_parse_uint("0x10000000000000000", ~0UL, &v));
}

static void test_missing_and_malformed_stay_inert(void)
{
    static const char *const bad[] = {"", "abc", "1000", "2000", "0", "7", "1007junk", "01007",
                                      "-1007", "0x", "1e3", "99999999999999999999999", "0x7d0"};
    const char *none[] = {NULL};
    struct capscan_policy p = with_env(none);
    unsigned i;
    long fam;

    CHECK(p.status == CAPSCAN_POLICY_UNSET && !capscan_policy_active(&p) && p.variable == NULL);
    for (fam = 1001; fam <= 1012; fam++)
        CHECK(capscan_policy_family(&p, fam) == CAPSCAN_PASS_THROUGH);
    CHECK(capscan_policy_tg_memory(&p, 32768) == 32768);

    p = family_value("");
    CHECK(p.status == CAPSCAN_POLICY_EMPTY && !capscan_policy_active(&p));
    for (i = 1; i < sizeof bad / sizeof bad[0]; i++) {
        p = family_value(bad[i]);
        CHECK(p.status == CAPSCAN_POLICY_BAD_FAMILY);
        CHECK(!capscan_policy_active(&p));
        CHECK(capscan_policy_family(&p, 1001) == CAPSCAN_PASS_THROUGH);
        CHECK(strcmp(p.variable, CAPSCAN_ENV_FAMILY) == 0 && strcmp(p.value, bad[i]) == 0);
    }
}

static void test_valid_values(void)
{
    struct capscan_policy p = family_value("1007");
    CHECK(capscan_policy_active(&p) && p.apple_family_max == 1007 && p.tg_floor == 0);
    p = family_value("0x3e9");
    CHECK(capscan_policy_active(&p) && p.apple_family_max == 1001);
    p = family_value("1001");
    CHECK(capscan_policy_active(&p) && p.apple_family_max == 1001);
    p = family_value("1999");
    CHECK(capscan_policy_active(&p) && p.apple_family_max == 1999);
}

static void test_aliases_and_precedence(void)
{
    const char *lume[] = {CAPSCAN_ENV_FAMILY_LUME, "1008", NULL};
    const char *tart[] = {CAPSCAN_ENV_FAMILY_TART, "1009", NULL};
    const char *all[] = {CAPSCAN_ENV_FAMILY_TART, "1009", CAPSCAN_ENV_FAMILY_LUME, "1008",
                         CAPSCAN_ENV_FAMILY, "1007", NULL};
    const char *lume_tart[] = {CAPSCAN_ENV_FAMILY_TART, "1009", CAPSCAN_ENV_FAMILY_LUME, "1008", NULL};
    const char *explicit_off[] = {CAPSCAN_ENV_FAMILY, "", CAPSCAN_ENV_FAMILY_TART, "1009", NULL};
    const char *bad_primary[] = {CAPSCAN_ENV_FAMILY, "abc", CAPSCAN_ENV_FAMILY_LUME, "1008", NULL};
    const char *tart_zero[] = {CAPSCAN_ENV_FAMILY_TART, "0", NULL};
    struct capscan_policy p;

    p = with_env(lume);
    CHECK(capscan_policy_active(&p) && p.apple_family_max == 1008 && strcmp(p.variable, CAPSCAN_ENV_FAMILY_LUME) == 0);
    p = with_env(tart);
    CHECK(capscan_policy_active(&p) && p.apple_family_max == 1009 && strcmp(p.variable, CAPSCAN_ENV_FAMILY_TART) == 0);
    p = with_env(all);
    CHECK(capscan_policy_active(&p) && p.apple_family_max == 1007 && strcmp(p.variable, CAPSCAN_ENV_FAMILY) == 0);
    p = with_env(lume_tart);
    CHECK(capscan_policy_active(&p) && p.apple_family_max == 1008);
    p = with_env(explicit_off);   /* a defined CAPSCAN_ variable decides, even empty */
    CHECK(p.status == CAPSCAN_POLICY_EMPTY && !capscan_policy_active(&p));
    p = with_env(bad_primary);    /* ...and a malformed one does not fall back */
    CHECK(p.status == CAPSCAN_POLICY_BAD_FAMILY && !capscan_policy_active(&p));
    p = with_env(tart_zero);      /* Tart's documented "off" value */
    CHECK(p.status == CAPSCAN_POLICY_BAD_FAMILY && !capscan_policy_active(&p));
}

static void test_family_answers(void)
{
    struct capscan_policy p = family_value("1007");
    long fam;

    for (fam = 1001; fam <= 1007; fam++)
        CHECK(capscan_policy_family(&p, fam) == CAPSCAN_ANSWER_YES);
    for (fam = 1008; fam <= 1021; fam++)
        CHECK(capscan_policy_family(&p, fam) == CAPSCAN_PASS_THROUGH);
    CHECK(capscan_policy_family(&p, 1000) == CAPSCAN_PASS_THROUGH);
    CHECK(capscan_policy_family(&p, 2001) == CAPSCAN_PASS_THROUGH);
    CHECK(capscan_policy_family(&p, 2002) == CAPSCAN_PASS_THROUGH);
    for (fam = 3001; fam <= 3006; fam++)
        CHECK(capscan_policy_family(&p, fam) == CAPSCAN_PASS_THROUGH);
    CHECK(capscan_policy_family(&p, 4001) == CAPSCAN_PASS_THROUGH);
    CHECK(capscan_policy_family(&p, -1) == CAPSCAN_PASS_THROUGH);
}

static void test_never_claims_metal3_or_metal4(void)
{
    static const char *const caps[] = {"1001", "1007", "1009", "1999", "0x7cf"};
    unsigned i;
    long fam;

    for (i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        struct capscan_policy p = family_value(caps[i]);
        CHECK(capscan_policy_active(&p));
        for (fam = 5001; fam <= 5006; fam++)
            CHECK(capscan_policy_family(&p, fam) == CAPSCAN_PASS_THROUGH);
    }
}

static void test_threadgroup_floor(void)
{
    const char *none[] = {CAPSCAN_ENV_FAMILY, "1007", NULL};
    const char *empty[] = {CAPSCAN_ENV_FAMILY, "1007", CAPSCAN_ENV_TG_FLOOR, "", NULL};
    const char *floor64k[] = {CAPSCAN_ENV_FAMILY, "1007", CAPSCAN_ENV_TG_FLOOR, "65536", NULL};
    const char *floor_hex[] = {CAPSCAN_ENV_FAMILY, "1007", CAPSCAN_ENV_TG_FLOOR, "0x8000", NULL};
    const char *bad[] = {CAPSCAN_ENV_FAMILY, "1007", CAPSCAN_ENV_TG_FLOOR, "64k", NULL};
    const char *zero[] = {CAPSCAN_ENV_FAMILY, "1007", CAPSCAN_ENV_TG_FLOOR, "0", NULL};
    const char *huge[] = {CAPSCAN_ENV_FAMILY, "1007", CAPSCAN_ENV_TG_FLOOR, "1048577", NULL};
    const char *lume_floor[] = {CAPSCAN_ENV_FAMILY, "1007", "LUME_METAL_MAX_THREADGROUP_MEMORY", "65536",
                                "TART_METAL_MAX_THREADGROUP_MEMORY", "65536", NULL};
    const char *inactive[] = {CAPSCAN_ENV_TG_FLOOR, "65536", NULL};
    struct capscan_policy p;

    p = with_env(none);
    CHECK(p.tg_floor == 0 && capscan_policy_tg_memory(&p, 32768) == 32768);
    p = with_env(empty);
    CHECK(capscan_policy_active(&p) && p.tg_floor == 0);
    p = with_env(floor64k);
    CHECK(capscan_policy_active(&p) && p.tg_floor == 65536);
    CHECK(capscan_policy_tg_memory(&p, 32768) == 65536);
    CHECK(capscan_policy_tg_memory(&p, 131072) == 131072);   /* a floor, not a cap */
    p = with_env(floor_hex);
    CHECK(capscan_policy_active(&p) && p.tg_floor == 32768);
    p = with_env(bad);
    CHECK(p.status == CAPSCAN_POLICY_BAD_TG_FLOOR && !capscan_policy_active(&p));
    CHECK(strcmp(p.variable, CAPSCAN_ENV_TG_FLOOR) == 0);
    CHECK(capscan_policy_family(&p, 1007) == CAPSCAN_PASS_THROUGH);
    p = with_env(zero);
    CHECK(p.status == CAPSCAN_POLICY_BAD_TG_FLOOR);
    p = with_env(huge);
    CHECK(p.status == CAPSCAN_POLICY_BAD_TG_FLOOR);
    p = with_env(lume_floor);   /* the LUME_/TART_ floors (65536 defaults) are ignored */
    CHECK(capscan_policy_active(&p) && p.tg_floor == 0);
    p = with_env(inactive);     /* a floor alone activates nothing */
    CHECK(!capscan_policy_active(&p) && capscan_policy_tg_memory(&p, 32768) == 32768);
}

static void test_verbose(void)
{
    const char *on[] = {CAPSCAN_ENV_VERBOSE, "1", NULL};
    const char *off[] = {CAPSCAN_ENV_VERBOSE, "0", NULL};
    struct capscan_policy p = with_env(on);
    CHECK(p.verbose == 1 && !capscan_policy_active(&p));
    p = with_env(off);
    CHECK(p.verbose == 0);
    CHECK(strcmp(capscan_policy_status_text(CAPSCAN_POLICY_UNSET), "is not set") == 0);
}

static void test_scrub_switch(void)
{
    const char *on[] = {CAPSCAN_ENV_SCRUB, "1", CAPSCAN_ENV_FAMILY, "1007", NULL};
    const char *other[] = {CAPSCAN_ENV_SCRUB, "yes", NULL};
    const char *device[] = {CAPSCAN_ENV_SCRUB, "device", NULL};
    const char *devices[] = {CAPSCAN_ENV_SCRUB, "devices", NULL};
    const char *dev[] = {CAPSCAN_ENV_SCRUB, "dev", NULL};
    struct capscan_policy p = with_env(on);
    CHECK(p.scrub == CAPSCAN_SCRUB_AT_LOAD && capscan_policy_active(&p));
    p = with_env(other);      /* only "1" and "device" switch it on */
    CHECK(p.scrub == 0);
    p = with_env(device);
    CHECK(p.scrub == CAPSCAN_SCRUB_AT_DEVICE);
    p = with_env(devices);
    CHECK(p.scrub == 0);
    p = with_env(dev);
    CHECK(p.scrub == 0);
    p = family_value("1007"); /* off by default */
    CHECK(p.scrub == 0);
}

static void test_scrub_list(void)
{
    char out[128];
    CHECK(capscan_scrub_list("/x/libcapscan_interposer.dylib", ":", 0, out, sizeof out) == 1 && strcmp(out, "") == 0);
    CHECK(capscan_scrub_list("/a/libA.dylib:/b b/libcapscan_interposer.universal.dylib:/c/libC.dylib", ":", 0, out,
                             sizeof out) == 1 && strcmp(out, "/a/libA.dylib:/c/libC.dylib") == 0);
    /* DYLD paths may hold spaces: only ':' separates there */
    CHECK(capscan_scrub_list("/Volumes/My Files/libother.dylib", ":", 0, out, sizeof out) == 0 &&
          strcmp(out, "/Volumes/My Files/libother.dylib") == 0);
    /* LD_PRELOAD separates with ':' or whitespace; empty entries vanish */
    CHECK(capscan_scrub_list("libcapscan_interposer.so /l/libx.so::/l/liby.so", ": ", 0, out, sizeof out) == 1 &&
          strcmp(out, "/l/libx.so:/l/liby.so") == 0);
    /* a name that merely contains the stem is not ours */
    CHECK(capscan_scrub_list("/l/mylibcapscan_interposer.so", ":", 0, out, sizeof out) == 0 &&
          strcmp(out, "/l/mylibcapscan_interposer.so") == 0);
    CHECK(capscan_scrub_list("/libcapscan_interposer", ":", 0, out, sizeof out) == 1);
    CHECK(capscan_scrub_list("/libcapscan_interpose", ":", 0, out, sizeof out) == 0);
    CHECK(capscan_scrub_list(NULL, ":", 0, out, sizeof out) == 0 && out[0] == '\0');
    CHECK(capscan_scrub_list("", ":", 0, out, sizeof out) == 0 && out[0] == '\0');
    CHECK(capscan_scrub_list("/a/long-library-name.dylib", ":", 0, out, 8) == -1 && out[0] == '\0');
    CHECK(capscan_scrub_list("/a", ":", 0, out, 0) == -1);
    /* the file actually injected, under any name (--dylib): by its path or its file name */
    CHECK(capscan_scrub_list("/a/libA.dylib:/opt/shims/gpu-fix.dylib", ":", "/opt/shims/gpu-fix.dylib", out,
                             sizeof out) == 1 && strcmp(out, "/a/libA.dylib") == 0);
    CHECK(capscan_scrub_list("/a/libA.dylib:/private/tmp/gpu-fix.dylib", ":", "/tmp/gpu-fix.dylib", out,
                             sizeof out) == 1 && strcmp(out, "/a/libA.dylib") == 0);
    CHECK(capscan_scrub_list("/a/libA.dylib:/b/gpu-fix.dylib.bak", ":", "/b/gpu-fix.dylib", out,
                             sizeof out) == 0 && strcmp(out, "/a/libA.dylib:/b/gpu-fix.dylib.bak") == 0);
    CHECK(capscan_scrub_list("/a/libA.dylib:/b/libcapscan_interposer.so", ":", "/c/gpu-fix.so", out,
                             sizeof out) == 1 && strcmp(out, "/a/libA.dylib") == 0);
    CHECK(capscan_scrub_list("/a/libA.dylib", ":", "", out, sizeof out) == 0);
    CHECK(capscan_scrub_list("/a/libA.dylib:/b/", ":", "/b/", out, sizeof out) == 1 &&
          strcmp(out, "/a/libA.dylib") == 0);
}

int main(void)
{
    test_parse_uint();
    test_missing_and_malformed_stay_inert();
    test_valid_values();
    test_aliases_and_precedence();
    test_family_answers();
    test_never_claims_metal3_or_metal4();
    test_threadgroup_floor();
    test_verbose();
    test_scrub_switch();
    test_scrub_list();
    return check_summary();
}
