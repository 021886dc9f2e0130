#!/usr/bin/env bash
# Two-cluster end-to-end suite on kind. Needs Docker and kind; skips loudly without them.
set -euo pipefail
if ! command -v kind >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
  echo "SKIPPED: kind-tests need a Docker engine and kind on PATH (not present on this machine)" >&2
  exit 0
fi
echo "The two-cluster kind suite is not written yet (see kind-tests/README.md)." >&2
exit 1
