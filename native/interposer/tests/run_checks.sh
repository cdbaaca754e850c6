#!/usr/bin/env bash
# Run every native test suite, echo its output, and sum the per-suite
# "N passed, N failed" lines into one final line of the same form.  A suite
# that crashes or prints no summary counts as one failure.
set -u
cd "$(dirname "$0")/.." || exit 1
PYTHON=${PYTHON:-python3}
total_passed=0
total_failed=0

suite() {
    local name=$1; shift
    local out rc line p f
    echo "== $name"
    out=$("$@" 2>&1)
    rc=$?
    printf '%s\n' "$out"
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' <<<"$out" | tail -n1)
    if [ -z "$line" ]; then
        echo "FAIL: $name produced no summary (exit $rc)"
        total_failed=$((total_failed + 1))
        return
    fi
    p=${line%% passed*}
    f=${line#*passed, }; f=${f%% failed}
    total_passed=$((total_passed + p))
    total_failed=$((total_failed + f))
    if [ "$rc" != 0 ] && [ "$f" = 0 ]; then
        echo "FAIL: $name exited $rc"
        total_failed=$((total_failed + 1))
    fi
}

suite "policy core (ASan+UBSan)" ./build/linux/test_policy
suite "runtime layer on GCC libobjc (ASan+UBSan)" env ASAN_OPTIONS=detect_leaks=0 ./build/linux/test_runtime
suite "entry layer: both hook paths, self-check, scrub (ASan+UBSan)" env ASAN_OPTIONS=detect_leaks=0 ./build/linux/test_entry
suite "LD_PRELOAD injection path (plain and ASan+UBSan)" bash tests/check_preload.sh
suite "macOS artifacts (Mach-O)" "$PYTHON" tests/check_macho.py build/macos

echo "$total_passed passed, $total_failed failed"
[ "$total_failed" = 0 ]
