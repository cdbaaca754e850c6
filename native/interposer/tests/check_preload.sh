#!/usr/bin/env bash
# The whole injection path on Linux: libcapscan_interposer.so preloaded into
# an unmodified program (fake-llama, capscan-probe) that uses libfakemetal.
# Every run starts from an empty environment so a caller's CAPSCAN_/LUME_/
# TART_ variables cannot leak in.  Ends with "N passed, N failed".
set -u
cd "$(dirname "$0")/../build/linux" || exit 1
SHIM="$PWD/libcapscan_interposer.so"
passed=0
failed=0

ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $1" >&2; }
# run VAR=VALUE... -- program args  (stdout+stderr combined into $out)
run() {
    local vars=()
    while [ "$1" != "--" ]; do vars+=("$1"); shift; done
    shift
    out=$(env -i PATH="$PATH" "${vars[@]}" "$@" 2>&1)
    rc=$?
}
has() { if grep -qxF -- "$2" <<<"$out"; then ok; else bad "$1: missing line: $2"; fi; }
lacks() { if grep -qF -- "$2" <<<"$out"; then bad "$1: unexpected: $2"; else ok; fi; }
count() { local n; n=$(grep -cF -- "$2" <<<"$out"); if [ "$n" = "$3" ]; then ok; else bad "$1: '$2' seen $n times, want $3"; fi; }
same() { if [ "$out" = "$2" ]; then ok; else bad "$1: output differs from stock"; diff <(echo "$2") <(echo "$out") >&2; fi; }

BANNER7='[capscan-interposer] enabled for fake-llama (apple_family_max=1007 threadgroup_memory=stock)'
HOOKED="[capscan-interposer] hook point in fake-llama: hooked -[_MTLDevice initGPUFamilySupport] (the published shims' hook point); the device factories are the fallback"
OFF_INIT="[capscan-interposer] interposing is disabled in dlopen-late: MTLCreateSystemDefaultDevice is not capscan's wrapper (the loader did not apply __interpose); devices are still patched through -[_MTLDevice initGPUFamilySupport]"
BANNER_LATE='[capscan-interposer] enabled for dlopen-late (apple_family_max=1007 threadgroup_memory=stock)'
FAM5='ggml_metal_device_init: GPU family: MTLGPUFamilyApple5  (1005)'
FAM7='ggml_metal_device_init: GPU family: MTLGPUFamilyApple7  (1007)'
RED_F='ggml_metal_device_init: simdgroup reduction   = false'
RED_T='ggml_metal_device_init: simdgroup reduction   = true'
MM_F='ggml_metal_device_init: simdgroup matrix mul. = false'
MM_T='ggml_metal_device_init: simdgroup matrix mul. = true'
BF_F='ggml_metal_device_init: has bfloat            = false'
BF_T='ggml_metal_device_init: has bfloat            = true'

# 1. stock, no preload
run -- ./fake-llama --bench
stock="$out"
has stock 'ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)'
has stock "$FAM5"
has stock 'ggml_metal_device_init: GPU family: MTLGPUFamilyCommon3 (3003)'
has stock "$RED_F"; has stock "$MM_F"; has stock "$BF_F"
has stock 'ggml_metal_device_init: has tensor            = false'
has stock 'ggml_metal_device_init: recommendedMaxWorkingSetSize  = 11453.25 MB'
lacks stock 'MTLGPUFamilyMetal'
lacks stock '[capscan-interposer]'
if grep -q 'tg128 |         12.63' <<<"$out"; then ok; else bad "stock: slow tg128 row"; fi

# 2. preloaded but not configured: byte-identical, silent
run LD_PRELOAD="$SHIM" -- ./fake-llama --bench
same "preload without env" "$stock"
run LD_PRELOAD="$SHIM" CAPSCAN_INTERPOSER_VERBOSE=1 -- ./fake-llama
has "verbose unset" '[capscan-interposer] inactive in fake-llama: CAPSCAN_METAL_APPLE_FAMILY_MAX is not set; Metal answers are left untouched'
has "verbose unset" "$FAM5"

# 3. enabled at 1007
run LD_PRELOAD="$SHIM" CAPSCAN_METAL_APPLE_FAMILY_MAX=1007 -- ./fake-llama --bench
has enabled "$BANNER7"
count enabled '[capscan-interposer]' 1      # both factories called, one banner
has enabled "$FAM7"; has enabled "$RED_T"; has enabled "$MM_T"; has enabled "$BF_T"
has enabled 'ggml_metal_device_init: has tensor            = false'
has enabled 'ggml_metal_device_init: GPU family: MTLGPUFamilyCommon3 (3003)'
lacks enabled 'MTLGPUFamilyMetal'           # never Metal3/Metal4
if grep -q 'tg128 |        206.60' <<<"$out"; then ok; else bad "enabled: fast tg128 row"; fi
if [ "$(head -n1 <<<"$out")" = "$BANNER7" ]; then ok; else bad "enabled: banner is not the first line"; fi

# 4. the MTLCopyAllDevices path alone
run LD_PRELOAD="$SHIM" CAPSCAN_METAL_APPLE_FAMILY_MAX=1007 -- ./fake-llama --devices=all
has "copy-all" "$BANNER7"; has "copy-all" "$RED_T"; has "copy-all" "$FAM7"

# 5. verbose success names the patched class and the hook point that took it
run LD_PRELOAD="$SHIM" CAPSCAN_METAL_APPLE_FAMILY_MAX=0x3ef CAPSCAN_INTERPOSER_VERBOSE=1 -- ./fake-llama
has verbose "$HOOKED"
has verbose '[capscan-interposer] patched device class FakeMTLParavirtualDevice (from -[_MTLDevice initGPUFamilySupport])'
has verbose "$BANNER7"
lacks verbose 'interposing is disabled'

# 6. aliases and precedence
run LD_PRELOAD="$SHIM" LUME_METAL_APPLE_FAMILY_MAX=1008 -- ./fake-llama
has lume '[capscan-interposer] enabled for fake-llama (apple_family_max=1008 threadgroup_memory=stock)'
has lume 'ggml_metal_device_init: GPU family: MTLGPUFamilyApple8  (1008)'
run LD_PRELOAD="$SHIM" TART_METAL_APPLE_FAMILY_MAX=1009 -- ./fake-llama
has tart 'ggml_metal_device_init: GPU family: MTLGPUFamilyApple9  (1009)'
run LD_PRELOAD="$SHIM" TART_METAL_APPLE_FAMILY_MAX=1009 LUME_METAL_APPLE_FAMILY_MAX=1008 CAPSCAN_METAL_APPLE_FAMILY_MAX=1007 -- ./fake-llama
has precedence "$BANNER7"; has precedence "$FAM7"
run LD_PRELOAD="$SHIM" TART_METAL_APPLE_FAMILY_MAX=1009 CAPSCAN_METAL_APPLE_FAMILY_MAX= -- ./fake-llama
has "explicit empty" "$FAM5"; lacks "explicit empty" '[capscan-interposer]'

# 7. malformed values: stock output, byte for byte, and silence
for v in '' abc 1000 2000 0 7 1007junk 01007 -1007 ' 1007' 0x 99999999999999999999999999; do
    run LD_PRELOAD="$SHIM" CAPSCAN_METAL_APPLE_FAMILY_MAX="$v" -- ./fake-llama --bench
    same "malformed '$v'" "$stock"
done
run LD_PRELOAD="$SHIM" CAPSCAN_METAL_APPLE_FAMILY_MAX=1007 CAPSCAN_METAL_MAX_THREADGROUP_MEMORY=64k -- ./fake-llama --bench
same "malformed floor" "$stock"

# 8. probe: format, injection, floor, aliases of the floor ignored
run -- ./capscan-probe
probe_stock="$out"
expected="probe=capscan-probe 1
device=Apple Paravirtual device"
for f in 1001 1002 1003 1004 1005 1006 1007 1008 1009 1010 2001 2002 3001 3002 3003 4001 4002 5001 5002; do
    case $f in 100[1-5]|2002|300[1-3]) val=true ;; *) val=false ;; esac
    expected+=$'\n'"supports_family.$f=$val"
done
expected+=$'\nmax_threadgroup_memory=32768\nrecommended_max_working_set_size=11453251584\nhas_unified_memory=true'
same "probe key=value format" "$expected"
run LD_PRELOAD="$SHIM" CAPSCAN_METAL_APPLE_FAMILY_MAX=1007 -- ./capscan-probe
has "probe injected" 'supports_family.1007=true'
has "probe injected" 'supports_family.1008=false'
has "probe injected" 'supports_family.5001=false'
has "probe injected" 'supports_family.5002=false'
has "probe injected" 'max_threadgroup_memory=32768'
has "probe injected" '[capscan-interposer] enabled for capscan-probe (apple_family_max=1007 threadgroup_memory=stock)'
run LD_PRELOAD="$SHIM" CAPSCAN_METAL_APPLE_FAMILY_MAX=1007 CAPSCAN_METAL_MAX_THREADGROUP_MEMORY=65536 -- ./capscan-probe
has "probe floor" 'max_threadgroup_memory=65536'
has "probe floor" '[capscan-interposer] enabled for capscan-probe (apple_family_max=1007 threadgroup_memory=65536)'
run LD_PRELOAD="$SHIM" CAPSCAN_METAL_APPLE_FAMILY_MAX=1007 TART_METAL_MAX_THREADGROUP_MEMORY=65536 LUME_METAL_MAX_THREADGROUP_MEMORY=65536 -- ./capscan-probe
has "probe alias floors ignored" 'max_threadgroup_memory=32768'
run LD_PRELOAD="$SHIM" CAPSCAN_METAL_APPLE_FAMILY_MAX=1007 -- ./capscan-probe --json
if python3 -c 'import json,sys; d=json.loads(sys.stdin.read().splitlines()[-1]); assert d["supports_family"]["1007"] is True and d["supports_family"]["5001"] is False and d["version"] == 1' <<<"$out"; then ok; else bad "probe --json injected"; fi
run -- ./capscan-probe --bogus
if [ "$rc" = 2 ]; then ok; else bad "probe usage exit $rc"; fi

# 9. a bare-metal host: real answers above the cap and Metal3/4 pass through
run LD_PRELOAD="$SHIM" CAPSCAN_FAKE_METAL_DEVICE=m1-ultra CAPSCAN_METAL_APPLE_FAMILY_MAX=1005 -- ./fake-llama
has host "$FAM7"
has host 'ggml_metal_device_init: GPU family: MTLGPUFamilyMetal4  (5002)'
has host "$RED_T"

# 10. rollback: a device class without maxThreadgroupMemoryLength and a floor
run LD_PRELOAD="$SHIM" CAPSCAN_FAKE_METAL_DEVICE=incomplete CAPSCAN_METAL_APPLE_FAMILY_MAX=1007 CAPSCAN_METAL_MAX_THREADGROUP_MEMORY=65536 -- ./fake-llama
has rollback '[capscan-interposer] disabled for fake-llama: device class has no maxThreadgroupMemoryLength (class FakeMTLIncompleteDevice); all hooks rolled back, stock answers kept'
has rollback "$FAM5"; has rollback "$RED_F"
lacks rollback 'enabled for'
count rollback '[capscan-interposer]' 1

# 11. no device at all
run LD_PRELOAD="$SHIM" CAPSCAN_FAKE_METAL_DEVICE=none CAPSCAN_METAL_APPLE_FAMILY_MAX=1007 -- ./capscan-probe
if [ "$rc" = 1 ] && [ "$out" = "Metal device unavailable" ]; then ok; else bad "no device: rc=$rc out=$out"; fi
run LD_PRELOAD="$SHIM" CAPSCAN_FAKE_METAL_DEVICE=none CAPSCAN_METAL_APPLE_FAMILY_MAX=1007 -- ./fake-llama --devices=all
if [ "$rc" = 1 ]; then ok; else bad "no device fake-llama rc=$rc"; fi

# 12. the proven hook point alone: a device made without the interposed factories
run LD_PRELOAD="$SHIM" CAPSCAN_METAL_APPLE_FAMILY_MAX=1007 CAPSCAN_INTERPOSER_VERBOSE=1 -- ./fake-llama --devices=internal
has "init path" '[capscan-interposer] patched device class FakeMTLParavirtualDevice (from -[_MTLDevice initGPUFamilySupport])'
has "init path" "$FAM7"; has "init path" "$RED_T"; lacks "init path" 'MTLGPUFamilyMetal'

# 13. the fallback: a device created without initGPUFamilySupport is patched as the factory returns it
run LD_PRELOAD="$SHIM" CAPSCAN_FAKE_METAL_DEVICE=paravirtual-no-init CAPSCAN_METAL_APPLE_FAMILY_MAX=1007 CAPSCAN_INTERPOSER_VERBOSE=1 -- ./fake-llama
has fallback '[capscan-interposer] patched device class FakeMTLParavirtualDevice (from the device factory)'
has fallback "$FAM7"; has fallback "$BANNER7"
# ... and neither path reaches a device made without both (the documented gap)
run LD_PRELOAD="$SHIM" CAPSCAN_FAKE_METAL_DEVICE=paravirtual-no-init CAPSCAN_METAL_APPLE_FAMILY_MAX=1007 -- ./fake-llama --devices=internal
has "neither path" "$FAM5"; has "neither path" "$RED_F"

# 14. the self-check: loaded but not interposed (dlopen, RTLD_LOCAL) -> one line; the init hook still works
run CAPSCAN_METAL_APPLE_FAMILY_MAX=1007 -- ./dlopen-late "$SHIM"
has "not interposed" "$OFF_INIT"
has "not interposed" "$BANNER_LATE"
has "not interposed" 'apple7=1 apple8=0 metal3=0 tg=32768'
count "not interposed" '[capscan-interposer]' 2
run -- ./dlopen-late "$SHIM"          # inactive policy: silent, stock
same "not interposed, inactive" 'apple7=0 apple8=0 metal3=0 tg=32768'

# 15. scrub (opt-in): children of an injected process start without the library
run LD_PRELOAD="$SHIM" CAPSCAN_INTERPOSER_SCRUB=1 -- sh -c 'env'
lacks scrub 'LD_PRELOAD='
run LD_PRELOAD="$SHIM" -- sh -c 'env'
has "no scrub by default" "LD_PRELOAD=$SHIM"

# 16. the same paths with every piece under ASan+UBSan
ASAN=../linux-asan
AOPT='ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0:halt_on_error=1'
UOPT='UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1'
run "$AOPT" "$UOPT" LD_PRELOAD="$PWD/$ASAN/libcapscan_interposer.so" CAPSCAN_METAL_APPLE_FAMILY_MAX=1007 -- $ASAN/fake-llama --bench
has "asan init path" "$BANNER7"; has "asan init path" "$FAM7"; lacks "asan init path" 'ERROR: AddressSanitizer'
if [ "$rc" = 0 ]; then ok; else bad "asan init path exit $rc"; fi
run "$AOPT" "$UOPT" LD_PRELOAD="$PWD/$ASAN/libcapscan_interposer.so" CAPSCAN_FAKE_METAL_DEVICE=paravirtual-no-init CAPSCAN_METAL_APPLE_FAMILY_MAX=1007 CAPSCAN_INTERPOSER_VERBOSE=1 -- $ASAN/fake-llama --devices=all
has "asan fallback" '[capscan-interposer] patched device class FakeMTLParavirtualDevice (from the device factory)'
if [ "$rc" = 0 ]; then ok; else bad "asan fallback exit $rc"; fi
run "$AOPT" "$UOPT" CAPSCAN_METAL_APPLE_FAMILY_MAX=1007 -- $ASAN/dlopen-late "$PWD/$ASAN/libcapscan_interposer.so"
has "asan not interposed" "$OFF_INIT"; has "asan not interposed" 'apple7=1 apple8=0 metal3=0 tg=32768'
if [ "$rc" = 0 ]; then ok; else bad "asan dlopen-late exit $rc"; fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
