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
case $(uname -m) in aarch64|arm64) ARCH=arm64 ;; *) ARCH=$(uname -m) ;; esac
expected+=$'\ncpu_brand=Apple M1 Ultra (Virtual)\narch='"$ARCH"$'\nhv_vmm_present=1'
same "probe key=value format" "$expected"
probe_base="$expected"
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

# 14. the self-check: loaded but not interposed (dlopen, RTLD_LOCAL); the init hook still works, so
#     success stays quiet (only the banner), and the line is there only when asked (verbose)...
run CAPSCAN_METAL_APPLE_FAMILY_MAX=1007 -- ./dlopen-late "$SHIM"
lacks "not interposed" "interposing is disabled"
has "not interposed" "$BANNER_LATE"
has "not interposed" 'apple7=1 apple8=0 metal3=0 tg=32768'
count "not interposed" '[capscan-interposer]' 1
run CAPSCAN_METAL_APPLE_FAMILY_MAX=1007 CAPSCAN_INTERPOSER_VERBOSE=1 -- ./dlopen-late "$SHIM"
has "not interposed, verbose" "$OFF_INIT"
# (the line without an init hook to fall back on, "Metal answers stay stock", is always said: test_entry)
run -- ./dlopen-late "$SHIM"          # inactive policy: silent, stock
same "not interposed, inactive" 'apple7=0 apple8=0 metal3=0 tg=32768'

# 15. scrub (opt-in): children of an injected process start without the library
run LD_PRELOAD="$SHIM" CAPSCAN_INTERPOSER_SCRUB=1 -- sh -c 'env'
lacks scrub 'LD_PRELOAD='
run LD_PRELOAD="$SHIM" -- sh -c 'env'
has "no scrub by default" "LD_PRELOAD=$SHIM"
# --dylib under another name: the scrub drops the file actually loaded, not only libcapscan_interposer*
RENAMED="$(mktemp -d)"
cp "$SHIM" "$RENAMED/gpu-fix.so"
run LD_PRELOAD="$RENAMED/gpu-fix.so" CAPSCAN_INTERPOSER_SCRUB=1 -- sh -c 'env'
lacks "scrub renamed" 'LD_PRELOAD='
# a framework-Python-shaped launcher (bin/python3.x execs Resources/Python.app/Contents/MacOS/Python):
# =1 drops the library in the launcher, so the interpreter runs stock; =device keeps it until the
# process that asks Metal for a device, which is patched and then drops it for its own children
FW="$RENAMED/Python.framework/Versions/3.12"
mkdir -p "$FW/bin" "$FW/Resources/Python.app/Contents/MacOS"
cp ./fake-launcher "$FW/bin/python3.12"
ln -s "$PWD/fake-llama" "$FW/Resources/Python.app/Contents/MacOS/Python"
run LD_PRELOAD="$SHIM" CAPSCAN_METAL_APPLE_FAMILY_MAX=1007 CAPSCAN_INTERPOSER_SCRUB=1 -- "$FW/bin/python3.12"
has "launcher, scrub at load" "$FAM5"; lacks "launcher, scrub at load" ' enabled for '
run LD_PRELOAD="$SHIM" CAPSCAN_METAL_APPLE_FAMILY_MAX=1007 CAPSCAN_INTERPOSER_SCRUB=device -- "$FW/bin/python3.12"
has "launcher, scrub at device" '[capscan-interposer] enabled for Python (apple_family_max=1007 threadgroup_memory=stock)'
has "launcher, scrub at device" "$FAM7"; has "launcher, scrub at device" "$RED_T"
rm -rf "$RENAMED"

# 17. capscan-probe --kernels against the fake compute path (CAPSCAN_FAKE_METAL_KERNELS)
KNAMES='simdgroup_reduction simdgroup_mm bfloat'
# kern_lines: the kernel.* lines without the elapsed_ms value
kern_lines() { grep '^kernel\.' <<<"$out" | sed 's/^kernel\.elapsed_ms=[0-9][0-9]*$/kernel.elapsed_ms=N/'; }
# kjson NAME PYTHON-ASSERTIONS-ON-d: the last output line parses as JSON and passes them
kjson() {
    if python3 -c 'import json,sys
d=json.loads(sys.stdin.read().splitlines()[-1])
k=d["kernels"]
'"$2" <<<"$out"; then ok; else bad "$1: JSON check failed: $2"; fi
}
now_ms() { date +%s%3N; }

run -- ./capscan-probe --kernels
if [ "$rc" = 0 ]; then ok; else bad "kernels pass: exit $rc"; fi
if [ "$(head -n 27 <<<"$out")" = "$probe_base" ]; then ok; else bad "kernels: the existing lines changed"; fi
same_k() { local got; got=$(kern_lines); if [ "$got" = "$2" ]; then ok; else bad "$1: kernel lines"; diff <(echo "$2") <(echo "$got") >&2; fi; }
same_k "kernels pass" $'kernel.msl_version=3.2\nkernel.simdgroup_reduction=pass\nkernel.simdgroup_mm=pass\nkernel.bfloat=pass\nkernel.elapsed_ms=N'
if [ "$(grep -c . <<<"$out")" = 32 ]; then ok; else bad "kernels pass: line count"; fi
for order in "--kernels --json" "--json --kernels"; do
    # shellcheck disable=SC2086
    run -- ./capscan-probe $order
    if [ "$rc" = 0 ] && [ "$(wc -l <<<"$out")" = 1 ]; then ok; else bad "kernels json ($order): rc=$rc"; fi
    kjson "kernels json ($order)" 'assert list(d)[-4:] == ["cpu_brand", "arch", "hv_vmm_present", "kernels"], list(d)
assert d["cpu_brand"] == "Apple M1 Ultra (Virtual)" and d["hv_vmm_present"] is True and d["arch"] in ("x86_64", "arm64")
assert list(k) == ["msl_version", "elapsed_ms", "simdgroup_reduction", "simdgroup_mm", "bfloat"], list(k)
assert k["msl_version"] == "3.2" and isinstance(k["elapsed_ms"], int)
assert all(k[c] == {"result": "pass", "message": None} for c in ("simdgroup_reduction", "simdgroup_mm", "bfloat"))'
done
run -- ./capscan-probe --json
if python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); assert "kernels" not in d and d["hv_vmm_present"] is True and list(d)[-3:] == ["cpu_brand","arch","hv_vmm_present"]' <<<"$out"; then ok; else bad "json host-proof keys"; fi
run -- ./capscan-probe
lacks "no --kernels" 'kernel.'

run CAPSCAN_FAKE_METAL_KERNELS=fail -- ./capscan-probe --kernels
same_k "kernels fail" "kernel.msl_version=3.2
kernel.simdgroup_reduction=fail
kernel.simdgroup_reduction.message=simd_sum: expected 496 got 0 at 3
kernel.simdgroup_mm=fail
kernel.simdgroup_mm.message=simdgroup_float8x8: expected 21 got 22 at 9
kernel.bfloat=fail
kernel.bfloat.message=got 0.333333 at 4, its input exactly: 1/3 needs more than bfloat's 8 significand bits, so the value was not stored as bfloat
kernel.elapsed_ms=N"
run CAPSCAN_FAKE_METAL_KERNELS=fail -- ./capscan-probe --json --kernels
kjson "kernels fail json" 'assert k["simdgroup_reduction"] == {"result": "fail", "message": "simd_sum: expected 496 got 0 at 3"}
assert k["simdgroup_mm"]["result"] == k["bfloat"]["result"] == "fail"'

run CAPSCAN_FAKE_METAL_KERNELS=compile-error -- ./capscan-probe --kernels
same_k "kernels compile-error" "kernel.msl_version=3.2
kernel.simdgroup_reduction=compile-error
kernel.simdgroup_reduction.message=program_source:20:23: error: use of undeclared identifier 'simd_sum' dst[tiitg] = simd_sum(v); ^
kernel.simdgroup_mm=compile-error
kernel.simdgroup_mm.message=program_source:32:5: error: unknown type name 'simdgroup_float8x8' simdgroup_float8x8 fa, fb, fc; ^
kernel.bfloat=compile-error
kernel.bfloat.message=program_source:29:11: error: unknown type name 'bfloat' const bfloat b = (bfloat) src[tiitg]; ^
kernel.elapsed_ms=N"
run CAPSCAN_FAKE_METAL_KERNELS=compile-error -- ./capscan-probe --kernels --json
kjson "kernels compile-error json" 'assert all(k[c]["result"] == "compile-error" and k[c]["message"].startswith("program_source:") for c in ("simdgroup_reduction", "simdgroup_mm", "bfloat"))'

# a long compiler message with control characters: one line, printable ASCII, 300 bytes
long=$'program_source:1:1: error: \x1b[31mred\x1b[0m\ttab\r\n\xc3\xa9'"$(printf 'x%.0s' $(seq 1 400))"$'\x7f end'
run CAPSCAN_FAKE_METAL_KERNELS=bfloat=compile-error CAPSCAN_FAKE_METAL_COMPILE_ERROR="$long" -- ./capscan-probe --kernels
msg=$(grep '^kernel\.bfloat\.message=' <<<"$out"); msg=${msg#kernel.bfloat.message=}
if [ "${#msg}" = 300 ] && [[ "$msg" == "program_source:1:1: error: [31mred [0m tab ??xxx"* ]] && LC_ALL=C grep -q '^[ -~]*$' <<<"$msg"; then ok; else bad "long message cleaned: ${#msg} '$msg'"; fi
has "long message, others run" 'kernel.simdgroup_reduction=pass'
run CAPSCAN_FAKE_METAL_KERNELS=bfloat=compile-error CAPSCAN_FAKE_METAL_COMPILE_ERROR="$long" -- ./capscan-probe --kernels --json
kjson "long message json" 'assert len(k["bfloat"]["message"]) == 300 and k["bfloat"]["message"].isascii()'

run CAPSCAN_FAKE_METAL_KERNELS=simdgroup_mm=fail,bfloat=compile-error -- ./capscan-probe --kernels
has "per capability" 'kernel.simdgroup_reduction=pass'
has "per capability" 'kernel.simdgroup_mm=fail'
has "per capability" 'kernel.simdgroup_mm.message=simdgroup_float8x8: expected 21 got 22 at 9'
has "per capability" 'kernel.bfloat=compile-error'
lacks "per capability" 'kernel.simdgroup_reduction.message'

# timeout: the command buffer never completes; done within the 1500 ms deadline
t0=$(now_ms)
run CAPSCAN_PROBE_KERNEL_TIMEOUT_MS=1500 CAPSCAN_FAKE_METAL_KERNELS=timeout -- ./capscan-probe --kernels
t=$(( $(now_ms) - t0 ))
if [ "$rc" = 0 ] && [ "$t" -lt 2500 ]; then ok; else bad "timeout: rc=$rc after ${t} ms"; fi
for c in $KNAMES; do has timeout "kernel.$c=timeout"; done
has timeout 'kernel.simdgroup_reduction.message=the command buffer did not complete before the deadline (status 2)'
has timeout 'kernel.bfloat.message=not run before the deadline: an earlier kernel timed out'
el=$(sed -n 's/^kernel\.elapsed_ms=//p' <<<"$out")
if [ "$el" -ge 1000 ] && [ "$el" -le 1500 ]; then ok; else bad "timeout elapsed_ms=$el"; fi
run CAPSCAN_PROBE_KERNEL_TIMEOUT_MS=1500 CAPSCAN_FAKE_METAL_KERNELS=timeout -- ./capscan-probe --json --kernels
kjson "timeout json" 'assert all(k[c]["result"] == "timeout" for c in ("simdgroup_reduction", "simdgroup_mm", "bfloat"))'
# only bfloat stuck: the others still pass
run CAPSCAN_PROBE_KERNEL_TIMEOUT_MS=1500 CAPSCAN_FAKE_METAL_KERNELS=bfloat=timeout -- ./capscan-probe --kernels
has "bfloat timeout" 'kernel.simdgroup_mm=pass'; has "bfloat timeout" 'kernel.bfloat=timeout'

# hang: the child never returns from a call; the parent kills it at the deadline
t0=$(now_ms)
run CAPSCAN_PROBE_KERNEL_TIMEOUT_MS=1500 CAPSCAN_FAKE_METAL_KERNELS=hang -- ./capscan-probe --kernels
t=$(( $(now_ms) - t0 ))
if [ "$rc" = 0 ] && [ "$t" -lt 2500 ]; then ok; else bad "hang: rc=$rc after ${t} ms"; fi
has hang 'kernel.simdgroup_reduction=timeout'
has hang 'kernel.simdgroup_reduction.message=no result within 1500 ms (the check was killed while running this kernel)'
has hang 'kernel.bfloat.message=no result within 1500 ms (the check was killed before this kernel ran)'
has hang 'supports_family.1005=true'   # the parent's own answers still printed

# crash: the child dies by SIGSEGV; the probe itself exits 0, and every kernel is
# "crash" (the check could not run), never "fail" (wrong numbers)
run CAPSCAN_FAKE_METAL_KERNELS=crash -- ./capscan-probe --kernels
if [ "$rc" = 0 ]; then ok; else bad "crash: exit $rc"; fi
same_k crash "kernel.msl_version=3.2
kernel.simdgroup_reduction=crash
kernel.simdgroup_reduction.message=the check died by signal 11 (SIGSEGV) while running this kernel; stderr: libfakemetal: simulated fault in dispatchThreadgroups:threadsPerThreadgroup:
kernel.simdgroup_mm=crash
kernel.simdgroup_mm.message=the check died by signal 11 (SIGSEGV) before this kernel ran
kernel.bfloat=crash
kernel.bfloat.message=the check died by signal 11 (SIGSEGV) before this kernel ran
kernel.elapsed_ms=N"
run CAPSCAN_FAKE_METAL_KERNELS=crash -- ./capscan-probe --kernels --json
if [ "$rc" = 0 ]; then ok; else bad "crash json: exit $rc"; fi
kjson "crash json" 'assert all(k[c]["result"] == "crash" and "SIGSEGV" in k[c]["message"] for c in ("simdgroup_reduction", "simdgroup_mm", "bfloat"))'
run CAPSCAN_FAKE_METAL_KERNELS=bfloat=crash -- ./capscan-probe --kernels
has "bfloat crash" 'kernel.simdgroup_reduction=pass'; has "bfloat crash" 'kernel.simdgroup_mm=pass'
has "bfloat crash" 'kernel.bfloat.message=the check died by signal 11 (SIGSEGV) while running this kernel; stderr: libfakemetal: simulated fault in dispatchThreadgroups:threadsPerThreadgroup:'
# the checks run in an exec'd process: the fake Metal aborts in a child that
# fork()ed without exec (Metal is not fork-safe), so a forked check would crash
# on every kernel; and the child is the probe itself, `--kernel-check MS`
run -- ./capscan-probe --kernels
lacks "exec'd check" 'kernel.simdgroup_reduction=crash'; lacks "exec'd check" 'forked child without exec'
run -- ./capscan-probe --kernel-check 5000
has "kernel-check child" 'R 0 1 '; has "kernel-check child" 'R 1 1 '; has "kernel-check child" 'R 2 1 '
# the kernels past the first of a capability, named by kernel: the mixed-precision
# flash-attention shape (128 threads, function constant) and simdgroup_bfloat8x8
run CAPSCAN_FAKE_METAL_KERNELS=capscan_simdgroup_mm_fa=fail -- ./capscan-probe --kernels
has "fa fail" 'kernel.simdgroup_reduction=pass'; has "fa fail" 'kernel.simdgroup_mm=fail'; has "fa fail" 'kernel.bfloat=pass'
has "fa fail" 'kernel.simdgroup_mm.message=capscan_simdgroup_mm_fa (half x half -> float, K transposed from device memory, 128 threads, function constant): expected -7 got -6 at 9'
run CAPSCAN_FAKE_METAL_KERNELS=capscan_bfloat_mm=fail -- ./capscan-probe --kernels
has "bfloat mm fail" 'kernel.simdgroup_mm=pass'; has "bfloat mm fail" 'kernel.bfloat=fail'
has "bfloat mm fail" 'kernel.bfloat.message=simdgroup_bfloat8x8: expected 21 got 22 at 9'
run CAPSCAN_FAKE_METAL_KERNELS=capscan_simdgroup_mm_fa=crash -- ./capscan-probe --kernels
has "fa crash" 'kernel.simdgroup_mm=crash'; has "fa crash" 'kernel.simdgroup_reduction=pass'
# the GPU watchdog (command buffer Error, MTLCommandBufferErrorTimeout): timeout, not fail
run CAPSCAN_FAKE_METAL_KERNELS=simdgroup_mm=gpu-timeout -- ./capscan-probe --kernels
has "gpu timeout" 'kernel.simdgroup_reduction=pass'; has "gpu timeout" 'kernel.simdgroup_mm=timeout'
has "gpu timeout" 'kernel.simdgroup_mm.message=command buffer error: Caused GPU Timeout Error (00000002:kIOGPUCommandBufferCallbackErrorTimeout)'
# injected-only failures (CAPSCAN_FAKE_METAL_KERNELS_INJECTED): stock passes, with the shim loaded it fails
run CAPSCAN_FAKE_METAL_KERNELS_INJECTED=simdgroup_mm=fail -- ./capscan-probe --kernels
has "injected-only, stock" 'kernel.simdgroup_mm=pass'
run LD_PRELOAD="$SHIM" CAPSCAN_METAL_APPLE_FAMILY_MAX=1007 CAPSCAN_FAKE_METAL_KERNELS_INJECTED=simdgroup_mm=fail -- ./capscan-probe --kernels
has "injected-only, injected" 'kernel.simdgroup_mm=fail'; has "injected-only, injected" 'supports_family.1007=true'
# the child's stderr stays out of the caller's
e=$(env -i PATH="$PATH" CAPSCAN_FAKE_METAL_KERNELS=crash ./capscan-probe --kernels 2>&1 >/dev/null)
if [ -z "$e" ]; then ok; else bad "crash: child stderr leaked: $e"; fi

# MSL 3.1 unavailable (macOS 13): bfloat not-run, the others run
run CAPSCAN_FAKE_OS_VERSION=13.6.1 -- ./capscan-probe --kernels
same_k "macOS 13" "kernel.msl_version=3.0
kernel.simdgroup_reduction=pass
kernel.simdgroup_mm=pass
kernel.bfloat=not-run
kernel.bfloat.message=bfloat needs MSL 3.1 (macOS 14 or later); this is macOS 13.6.1
kernel.elapsed_ms=N"
run CAPSCAN_FAKE_OS_VERSION=14.7 -- ./capscan-probe --kernels
has "macOS 14" 'kernel.msl_version=3.1'; has "macOS 14" 'kernel.bfloat=pass'

# sysctl names unavailable / a bare-metal host
run CAPSCAN_FAKE_CPU_BRAND= CAPSCAN_FAKE_HV_VMM_PRESENT= CAPSCAN_FAKE_OS_VERSION= -- ./capscan-probe --kernels
has "no sysctl" 'cpu_brand='; has "no sysctl" 'hv_vmm_present='; has "no sysctl" 'kernel.msl_version='
has "no sysctl" 'kernel.bfloat=pass'
run CAPSCAN_FAKE_CPU_BRAND= CAPSCAN_FAKE_HV_VMM_PRESENT= CAPSCAN_FAKE_OS_VERSION= -- ./capscan-probe --kernels --json
kjson "no sysctl json" 'assert d["cpu_brand"] == "" and d["hv_vmm_present"] is None and k["msl_version"] is None'
run CAPSCAN_FAKE_METAL_DEVICE=m1-ultra CAPSCAN_FAKE_CPU_BRAND='Apple M1 Ultra' CAPSCAN_FAKE_HV_VMM_PRESENT=0 -- ./capscan-probe --json
if python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); assert d["cpu_brand"] == "Apple M1 Ultra" and d["hv_vmm_present"] is False' <<<"$out"; then ok; else bad "host json"; fi

# a device without the compute selectors; no device; usage
run CAPSCAN_FAKE_METAL_DEVICE=incomplete -- ./capscan-probe --kernels
for c in $KNAMES; do has incomplete "kernel.$c=not-run"; done
has incomplete 'kernel.bfloat.message=the Metal device does not answer newLibraryWithSource:options:error:'
run CAPSCAN_FAKE_METAL_DEVICE=none -- ./capscan-probe --kernels
if [ "$rc" = 1 ] && [ "$out" = "Metal device unavailable" ]; then ok; else bad "kernels, no device: rc=$rc out=$out"; fi
for args in "--kernels --kernels" "--json --json" "--kernels --bogus" "kernels"; do
    # shellcheck disable=SC2086
    run -- ./capscan-probe $args
    if [ "$rc" = 2 ] && [ "$out" = "usage: capscan-probe [--json] [--kernels]" ]; then ok; else bad "usage '$args': rc=$rc"; fi
done
# malformed timeouts fall back to the default (the pass run is fast either way)
for v in '' 0 abc 600001 -5 1500ms; do
    run CAPSCAN_PROBE_KERNEL_TIMEOUT_MS="$v" -- ./capscan-probe --kernels
    has "timeout '$v'" 'kernel.bfloat=pass'
done

# injected: the kernels run on the patched device, the claims change, the kernel answers do not
run LD_PRELOAD="$SHIM" CAPSCAN_METAL_APPLE_FAMILY_MAX=1007 -- ./capscan-probe --kernels
has "kernels injected" 'supports_family.1007=true'
for c in $KNAMES; do has "kernels injected" "kernel.$c=pass"; done
count "kernels injected" '[capscan-interposer] enabled for capscan-probe' 1   # the parent's device only

# the kernel sources: the constructs llama.cpp gates on, embedded in the probe
K=../../src/kernels
for want in 'simd_sum(' 'simd_max('; do
    if grep -qF -- "$want" $K/simdgroup_reduction.metal; then ok; else bad "simdgroup_reduction.metal lacks $want"; fi
done
for want in simdgroup_float8x8 simdgroup_half8x8 'simdgroup_load(' 'simdgroup_multiply_accumulate(' 'simdgroup_store('; do
    if grep -qF -- "$want" $K/simdgroup_mm.metal; then ok; else bad "simdgroup_mm.metal lacks $want"; fi
done
for want in 'bfloat b' '(float) b' '__METAL_VERSION__ < 310'; do
    if grep -qF -- "$want" $K/bfloat.metal; then ok; else bad "bfloat.metal lacks $want"; fi
done
if ! grep -q bfloat $K/simdgroup_reduction.metal $K/simdgroup_mm.metal; then ok; else bad "bfloat outside its own library"; fi
for want in 'kernel void capscan_simdgroup_reduction(' 'simdgroup_multiply_accumulate(fc, fa, fb, fc);' 'const bfloat b = (bfloat) src[tiitg];'; do
    if grep -aqF -- "$want" ./capscan-probe; then ok; else bad "probe binary lacks the embedded source: $want"; fi
done
for f in ../macos-obj/capscan-probe.arm64 ../macos-obj/capscan-probe.x86_64; do
    if grep -aqF 'simdgroup_half8x8 ha, hb, hc;' "$f"; then ok; else bad "$f lacks the embedded source"; fi
done

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
has "asan not interposed" "$BANNER_LATE"; has "asan not interposed" 'apple7=1 apple8=0 metal3=0 tg=32768'
if [ "$rc" = 0 ]; then ok; else bad "asan dlopen-late exit $rc"; fi
for mode in pass fail compile-error crash timeout; do
    run "$AOPT" "$UOPT" CAPSCAN_PROBE_KERNEL_TIMEOUT_MS=1500 CAPSCAN_FAKE_METAL_KERNELS=$mode -- $ASAN/capscan-probe --kernels --json
    lacks "asan probe $mode" 'ERROR: AddressSanitizer'; lacks "asan probe $mode" 'runtime error'
    if [ "$rc" = 0 ]; then ok; else bad "asan probe $mode exit $rc"; fi
    kjson "asan probe $mode" 'assert k["simdgroup_reduction"]["result"] == {"pass": "pass", "fail": "fail", "compile-error": "compile-error", "crash": "crash", "timeout": "timeout"}["'$mode'"]'
done

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
