/* fake-llama: an unmodified "application" linked against libfakemetal.
 *
 * It knows nothing about capscan.  It asks its Metal device the questions
 * llama.cpp b10167 asks (ggml-metal-device.m, log era M4) with the same
 * flag logic, prints the capability block to stderr in the same format,
 * and with --bench prints a llama-bench markdown table on stdout whose
 * speed depends on the flags, as the real kernels' availability does.
 *
 *   fake-llama [--bench] [--devices=default|all|internal]
 *   fake-llama -m MODEL [-p N] [-n N] [-r N] [-o md]   (llama-bench's arguments: --bench)
 *
 * --devices=all takes the device from MTLCopyAllDevices() instead of
 * MTLCreateSystemDefaultDevice(), to exercise the other factory hook;
 * --devices=internal from a function capscan does not interpose (a device a
 * framework creates for itself), which only the init hook reaches.
 *
 * CAPSCAN_FAKE_LLAMA_PREAMBLE: a line printed first on stderr, as a real
 * build's common_init prints its build line (the Action's test needs a
 * stock run that proves its arm64 macOS guest from its own output). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_metal.h"

#define TAG "ggml_metal_device_init"

enum { APPLE1 = 1001, APPLE6 = 1006, APPLE7 = 1007, COMMON1 = 3001, METAL3 = 5001, METAL4 = 5002 };

static const char *flag(int v)
{
    return v ? "true" : "false";
}

/* llama-bench pads t/s to 20 visible columns: its printer adds one byte of
 * width for the two-byte UTF-8 "±" ("HACK: the utf-8 character is 2 bytes"). */
static void print_bench(int fast)
{
    printf("| model                          |       size |     params | backend    | threads |          test |                  t/s |\n");
    printf("| ------------------------------ | ---------: | ---------: | ---------- | ------: | ------------: | -------------------: |\n");
    printf("| %-30s | %10s | %10s | %-10s | %7d | %13s | %21s |\n", "llama 1B Q4_K - Medium", "762.81 MiB",
           "1.24 B", "MTL,BLAS", 8, "pp512", fast ? "4786.70 \xc2\xb1 12.31" : "431.86 \xc2\xb1 2.04");
    printf("| %-30s | %10s | %10s | %-10s | %7d | %13s | %21s |\n", "llama 1B Q4_K - Medium", "762.81 MiB",
           "1.24 B", "MTL,BLAS", 8, "tg128", fast ? "206.60 \xc2\xb1 0.52" : "12.63 \xc2\xb1 0.05");
    printf("\nbuild: ee3d1b54c (10167)\n");
}

int main(int argc, char **argv)
{
    int bench = 0, from_all = 0, internal = 0, i;
    id dev, all;
    const char *name;
    BOOL reduction, mm, unified, bfloat, tensor;

    if (getenv("CAPSCAN_FAKE_LLAMA_PREAMBLE") && *getenv("CAPSCAN_FAKE_LLAMA_PREAMBLE"))
        fprintf(stderr, "%s\n", getenv("CAPSCAN_FAKE_LLAMA_PREAMBLE"));
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--bench") == 0)
            bench = 1;
        else if (strcmp(argv[i], "--devices=all") == 0)
            from_all = 1;
        else if (strcmp(argv[i], "--devices=internal") == 0)
            internal = 1;
        else if (i + 1 < argc && strcmp(argv[i], "-m") == 0)
            bench = 1, i++;                       /* llama-bench -m MODEL: the model is not read */
        else if (i + 1 < argc && (strcmp(argv[i], "-p") == 0 || strcmp(argv[i], "-n") == 0 ||
                                  strcmp(argv[i], "-r") == 0 || strcmp(argv[i], "-o") == 0))
            i++;
        else if (strcmp(argv[i], "--devices=default") != 0) {
            fprintf(stderr, "usage: fake-llama [--bench] [--devices=default|all|internal] [-m MODEL [-p N] [-n N] [-r N]]\n");
            return 2;
        }
    }

    if (internal) {
        dev = FakeMTLCreateDeviceInternally();
    } else if (from_all) {
        all = MTLCopyAllDevices();
        dev = [all count] ? [all objectAtIndex:0] : nil;
    } else {
        dev = MTLCreateSystemDefaultDevice();
    }
    if (!dev) {
        fprintf(stderr, "%s: error: failed to create Metal device\n", TAG);
        return 1;
    }
    name = [[dev name] UTF8String];

    reduction = [dev supportsFamily:APPLE7] || [dev supportsFamily:METAL3];
    mm = [dev supportsFamily:APPLE7];
    unified = [dev hasUnifiedMemory];
    bfloat = [dev supportsFamily:METAL3] || [dev supportsFamily:APPLE6];
    if (getenv("GGML_METAL_BF16_DISABLE") != NULL)   /* ggml-metal-device.m: any value, even empty */
        bfloat = NO;
    tensor = [dev supportsFamily:METAL4];
    if (getenv("GGML_METAL_TENSOR_ENABLE") == NULL && !strstr(name, "M5") && !strstr(name, "M6") &&
        !strstr(name, "A19") && !strstr(name, "A20")) {
        fprintf(stderr, "%s: tensor API disabled for pre-M5 and pre-A19 devices\n", TAG);
        tensor = NO;
    }
    fprintf(stderr, "ggml_metal_library_init: using embedded metal library\n");
    fprintf(stderr, "ggml_metal_library_init: loaded in 0.011 sec\n");
    fprintf(stderr, "ggml_metal_rsets_init: creating a residency set collection (keep_alive = 180 s)\n");
    fprintf(stderr, "%s: GPU name:   MTL0 (%s)\n", TAG, name);
    for (i = APPLE1 + 20; i >= APPLE1; i--)
        if ([dev supportsFamily:i]) {
            fprintf(stderr, "%s: GPU family: MTLGPUFamilyApple%d  (%d)\n", TAG, i - APPLE1 + 1, i);
            break;
        }
    for (i = COMMON1 + 5; i >= COMMON1; i--)
        if ([dev supportsFamily:i]) {
            fprintf(stderr, "%s: GPU family: MTLGPUFamilyCommon%d (%d)\n", TAG, i - COMMON1 + 1, i);
            break;
        }
    for (i = METAL3 + 5; i >= METAL3; i--)
        if ([dev supportsFamily:i]) {
            fprintf(stderr, "%s: GPU family: MTLGPUFamilyMetal%d  (%d)\n", TAG, i - METAL3 + 3, i);
            break;
        }
    fprintf(stderr, "%s: simdgroup reduction   = %s\n", TAG, flag(reduction));
    fprintf(stderr, "%s: simdgroup matrix mul. = %s\n", TAG, flag(mm));
    fprintf(stderr, "%s: has unified memory    = %s\n", TAG, flag(unified));
    fprintf(stderr, "%s: has bfloat            = %s\n", TAG, flag(bfloat));
    fprintf(stderr, "%s: has tensor            = %s\n", TAG, flag(tensor));
    fprintf(stderr, "%s: use residency sets    = %s\n", TAG, flag(1));
    fprintf(stderr, "%s: use shared buffers    = %s\n", TAG, flag(unified));
    fprintf(stderr, "%s: recommendedMaxWorkingSetSize  = %8.2f MB\n", TAG,
            [dev recommendedMaxWorkingSetSize] / 1e6);

    /* Per-context lines (ggml-metal-context.m), printed at context creation. */
    fprintf(stderr, "ggml_metal_init: allocating\n");
    all = MTLCopyAllDevices();
    for (i = 0; i < (int)[all count]; i++)
        fprintf(stderr, "ggml_metal_init: found device: %s\n", [[[all objectAtIndex:i] name] UTF8String]);
    fprintf(stderr, "ggml_metal_init: picking default device: %s\n", name);

    if (bench)
        print_bench(reduction && mm);
    return 0;
}
