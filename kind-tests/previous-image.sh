#!/usr/bin/env bash
# The previous release's image for the node tier's upgrade (`kind-tests/previous-image.sh
# [REF]`, REF defaulting to LIQO_PREVIOUS_REF or a65511d): built from that commit's own recipe
# (its image/build.sh) in a worktree of its own, as liqo-discovery:previous-<short commit>,
# unless podman has it already. Prints the image's name as its last line; prints nothing and
# exits 0 where REF is no commit here or has no image recipe (the node tier then says it skips
# the upgrade). .ci/run starts it while the tests run, at the lowest priority.
set -euo pipefail
cd "$(dirname "$0")/.."

ref=${1:-${LIQO_PREVIOUS_REF:-a65511d}}
if ! git rev-parse --verify -q "$ref^{commit}" >/dev/null || ! git cat-file -e "$ref:image/build.sh" 2>/dev/null; then
  exit 0
fi
image="liqo-discovery:previous-$(git rev-parse --short "$ref")"
if ! podman image exists "$image"; then
  tree="$(mktemp -d)/previous"
  trap 'git worktree remove --force "$tree" >/dev/null 2>&1 || true' EXIT
  git worktree add --detach -q "$tree" "$ref"
  # A target folder of its own: the two trees' crates share names and hashes, so in one folder
  # the previous build would leave its binary where this tree's next build finds it fresh.
  # Built only to be upgraded from, so with cheaper settings than a release's (thin LTO over
  # 16 codegen units, not fat over one): the same code and behaviour, a larger binary, a build
  # that keeps both cores busy instead of one for its last minutes.
  CARGO_PROFILE_IMAGE_LTO=thin CARGO_PROFILE_IMAGE_CODEGEN_UNITS=16 CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}/previous-commit" "$tree/image/build.sh" "$image" >/dev/null
fi
echo "$image"
