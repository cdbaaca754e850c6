# Sourced by the stand-ins: append this call's argv to $CAPSCAN_STANDIN_LOG as
# one record: "<argc>\0<name>\0<arg1>\0...<argN>\0" (args cannot hold NUL).
if [ -n "${CAPSCAN_STANDIN_LOG:-}" ]; then
  {
    printf '%d\0' "$#"
    printf '%s\0' "$(basename "$0")"
    for a in "$@"; do printf '%s\0' "$a"; done
  } >> "$CAPSCAN_STANDIN_LOG"
fi
