# What every script of the suites shares (sourced from the repository's root, not run): how
# they speak and how they wait. Every wait is on a condition, with a deadline.

say() { printf '\n=== %s\n' "$*" >&2; }
fail() { echo "FAILED: $*" >&2; exit 1; }
has() { "$@" >/dev/null 2>&1; }
hasnt() { ! "$@" >/dev/null 2>&1; }

# wait_for SECONDS DESCRIPTION COMMAND...: runs COMMAND (a function too) every second until it
# succeeds; fails after SECONDS.
wait_for() {
  local deadline=$((SECONDS + $1)) limit=$1 what=$2 started=$SECONDS
  shift 2
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || fail "timed out after ${limit}s waiting for $what"
    sleep 1
  done
  echo "ok: $what ($((SECONDS - started)) s)" >&2
}
