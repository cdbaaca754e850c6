/* capscan-probe: print what the default Metal device claims.
 *
 *   capscan-probe            key=value lines (format "capscan-probe 1")
 *   capscan-probe --json     one JSON object on one line
 *   capscan-probe --kernels  also compile and run one small Metal kernel per
 *                            capability llama.cpp gates on (kernel.* lines,
 *                            "kernels" in JSON); combinable with --json
 *
 * Every output also carries the host-proof values cpu_brand, arch and
 * hv_vmm_present.  Exit 0 on success (whatever the kernels' results), 1 when
 * there is no Metal device, 2 on bad usage.  Written against the runtime's C
 * API so it builds without an SDK.
 *
 * CAPSCAN_PROBE_KERNEL_TIMEOUT_MS: the kernel checks' total deadline
 * (1..600000, default 20000).
 *
 * `capscan-probe --kernel-check MS` is the checks' own process, which
 * --kernels starts (fork + execv of this file): not for users. */
#include "capscan/libc_min.h"
#include "capscan/objc_call.h"
#include "capscan/probe_kernels.h"
#include "capscan/textbuf.h"

extern id MTLCreateSystemDefaultDevice(void);

/* Every MTLGPUFamily in Apple's <Metal/MTLDevice.h>, nothing more. */
static const long families[] = {
    1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1009, 1010, /* Apple1-10 */
    2001, 2002,                                                 /* Mac1-2 */
    3001, 3002, 3003,                                           /* Common1-3 */
    4001, 4002,                                                 /* MacCatalyst1-2 */
    5001, 5002                                                  /* Metal3, Metal4 (macOS 26+; NO before) */
};
#define FAMILY_COUNT (sizeof families / sizeof families[0])

struct report {
    const char *device;
    int supports[FAMILY_COUNT];
    unsigned long max_threadgroup_memory;
    unsigned long long recommended_max_working_set_size;
    int has_unified_memory;
    struct capscan_host host;
    int kernels_ran;
    struct capscan_kernels kernels;
};

static void put_str(int fd, const char *text)
{
    unsigned long n = 0;
    while (text[n])
        n++;
    capscan_write_all(fd, text, n);
}

static void query(id device, struct report *r)
{
    unsigned i;
    id name = capscan_responds(device, "name") ? capscan_send_id(device, "name") : 0;
    const char *text = name && capscan_responds(name, "UTF8String") ? capscan_send_cstr(name, "UTF8String") : 0;
    int has_family = capscan_responds(device, "supportsFamily:");

    r->device = text ? text : "";
    for (i = 0; i < FAMILY_COUNT; i++)
        r->supports[i] = has_family && capscan_send_bool_long(device, "supportsFamily:", families[i]);
    r->max_threadgroup_memory = capscan_responds(device, "maxThreadgroupMemoryLength")
                                    ? capscan_send_ulong(device, "maxThreadgroupMemoryLength") : 0;
    r->recommended_max_working_set_size = capscan_responds(device, "recommendedMaxWorkingSetSize")
                                              ? capscan_send_u64(device, "recommendedMaxWorkingSetSize") : 0;
    r->has_unified_memory = capscan_responds(device, "hasUnifiedMemory") &&
                            capscan_send_bool(device, "hasUnifiedMemory");
}

static const char *boolean(int value)
{
    return value ? "true" : "false";
}

static void print_lines(const struct report *r, struct capscan_buf *out)
{
    unsigned i;

    capscan_buf_str(out, "probe=capscan-probe 1\ndevice=");
    capscan_buf_clean(out, r->device, 256);
    capscan_buf_char(out, '\n');
    for (i = 0; i < FAMILY_COUNT; i++) {
        capscan_buf_str(out, "supports_family.");
        capscan_buf_int(out, families[i]);
        capscan_buf_char(out, '=');
        capscan_buf_str(out, boolean(r->supports[i]));
        capscan_buf_char(out, '\n');
    }
    capscan_buf_str(out, "max_threadgroup_memory=");
    capscan_buf_uint(out, r->max_threadgroup_memory);
    capscan_buf_str(out, "\nrecommended_max_working_set_size=");
    capscan_buf_uint(out, r->recommended_max_working_set_size);
    capscan_buf_str(out, "\nhas_unified_memory=");
    capscan_buf_str(out, boolean(r->has_unified_memory));
    capscan_buf_str(out, "\ncpu_brand=");
    capscan_buf_clean(out, r->host.cpu_brand, 256);
    capscan_buf_str(out, "\narch=");
    capscan_buf_str(out, r->host.arch);
    capscan_buf_str(out, "\nhv_vmm_present=");
    if (r->host.hv_vmm_present >= 0)
        capscan_buf_int(out, r->host.hv_vmm_present);
    capscan_buf_char(out, '\n');
    if (!r->kernels_ran)
        return;
    capscan_buf_str(out, "kernel.msl_version=");
    capscan_buf_str(out, r->kernels.msl_version);
    capscan_buf_char(out, '\n');
    for (i = 0; i < CAPSCAN_KERNEL_COUNT; i++) {
        capscan_buf_str(out, "kernel.");
        capscan_buf_str(out, capscan_kernel_names[i]);
        capscan_buf_char(out, '=');
        capscan_buf_str(out, capscan_kernel_result_name(r->kernels.cap[i].result));
        capscan_buf_char(out, '\n');
        if (r->kernels.cap[i].message[0]) {
            capscan_buf_str(out, "kernel.");
            capscan_buf_str(out, capscan_kernel_names[i]);
            capscan_buf_str(out, ".message=");
            capscan_buf_clean(out, r->kernels.cap[i].message, CAPSCAN_KERNEL_MESSAGE_MAX);
            capscan_buf_char(out, '\n');
        }
    }
    capscan_buf_str(out, "kernel.elapsed_ms=");
    capscan_buf_uint(out, r->kernels.elapsed_ms);
    capscan_buf_char(out, '\n');
}

static void print_json(const struct report *r, struct capscan_buf *out)
{
    unsigned i;

    capscan_buf_str(out, "{\"probe\":\"capscan-probe\",\"version\":1,\"device\":");
    capscan_buf_json_str(out, r->device);
    capscan_buf_str(out, ",\"supports_family\":{");
    for (i = 0; i < FAMILY_COUNT; i++) {
        capscan_buf_str(out, i ? ",\"" : "\"");
        capscan_buf_int(out, families[i]);
        capscan_buf_str(out, "\":");
        capscan_buf_str(out, boolean(r->supports[i]));
    }
    capscan_buf_str(out, "},\"max_threadgroup_memory\":");
    capscan_buf_uint(out, r->max_threadgroup_memory);
    capscan_buf_str(out, ",\"recommended_max_working_set_size\":");
    capscan_buf_uint(out, r->recommended_max_working_set_size);
    capscan_buf_str(out, ",\"has_unified_memory\":");
    capscan_buf_str(out, boolean(r->has_unified_memory));
    capscan_buf_str(out, ",\"cpu_brand\":");
    capscan_buf_json_str(out, r->host.cpu_brand);
    capscan_buf_str(out, ",\"arch\":");
    capscan_buf_json_str(out, r->host.arch);
    capscan_buf_str(out, ",\"hv_vmm_present\":");
    capscan_buf_str(out, r->host.hv_vmm_present < 0 ? "null" : boolean(r->host.hv_vmm_present));
    if (r->kernels_ran) {
        capscan_buf_str(out, ",\"kernels\":{\"msl_version\":");
        if (r->kernels.msl_version[0])
            capscan_buf_json_str(out, r->kernels.msl_version);
        else
            capscan_buf_str(out, "null");
        capscan_buf_str(out, ",\"elapsed_ms\":");
        capscan_buf_uint(out, r->kernels.elapsed_ms);
        for (i = 0; i < CAPSCAN_KERNEL_COUNT; i++) {
            capscan_buf_str(out, ",\"");
            capscan_buf_str(out, capscan_kernel_names[i]);
            capscan_buf_str(out, "\":{\"result\":\"");
            capscan_buf_str(out, capscan_kernel_result_name(r->kernels.cap[i].result));
            capscan_buf_str(out, "\",\"message\":");
            if (r->kernels.cap[i].message[0])
                capscan_buf_json_str(out, r->kernels.cap[i].message);
            else
                capscan_buf_str(out, "null");
            capscan_buf_char(out, '}');
        }
        capscan_buf_char(out, '}');
    }
    capscan_buf_str(out, "}\n");
}

int main(int argc, char **argv)
{
    /* 4 KiB for the device lines, plus three kernel messages (JSON-escaped at
     * most twice their 300 bytes) and the CPU brand. */
    static char storage[16384];
    static struct report report;
    struct capscan_buf out;
    static char self[1024];
    int json = 0, kernels = 0, i;
    id device;

    if (argc == 3 && capscan_streq(argv[1], "--kernel-check"))
        capscan_kernels_child(capscan_kernel_timeout_ms(argv[2]));

    for (i = 1; i < argc; i++) {
        if (!json && capscan_streq(argv[i], "--json")) {
            json = 1;
        } else if (!kernels && capscan_streq(argv[i], "--kernels")) {
            kernels = 1;
        } else {
            put_str(2, "usage: capscan-probe [--json] [--kernels]\n");
            return 2;
        }
    }
    capscan_host_query(&report.host);
    /* The checks run in their own exec'd process, before this one touches Metal. */
    if (kernels) {
        capscan_self_path(self, sizeof self);
        capscan_kernels_run(&report.host, self, capscan_kernel_timeout_ms(getenv("CAPSCAN_PROBE_KERNEL_TIMEOUT_MS")),
                            &report.kernels);
        report.kernels_ran = 1;
    }
    device = MTLCreateSystemDefaultDevice();
    if (!device) {
        put_str(2, "Metal device unavailable\n");
        return 1;
    }
    query(device, &report);
    capscan_buf_init(&out, storage, sizeof storage);
    if (json)
        print_json(&report, &out);
    else
        print_lines(&report, &out);
    capscan_write_all(1, out.data, out.len);
    return 0;
}
