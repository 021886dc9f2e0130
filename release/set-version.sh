#!/usr/bin/env bash
# Sets the version of everything that ships: [workspace.package] version in Cargo.toml (where
# the binaries, the image and the archives read it), Cargo.lock, and the image tag in every
# manifest under manifests/ (api/tests/manifests.rs fails when one disagrees).
#
#   release/set-version.sh 0.2.0
set -euo pipefail
cd "$(dirname "$0")/.."
new="${1:-}"
new="${new#v}"
if ! [[ "$new" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "usage: release/set-version.sh MAJOR.MINOR.PATCH[-PRERELEASE]" >&2
  exit 2
fi
old="$(image/version.sh)"
sed -i "/^\[workspace.package\]/,/^\[/s/^version = \"$old\"\$/version = \"$new\"/" Cargo.toml
cargo update --workspace --offline -q 2>/dev/null || cargo update --workspace -q
grep -rl "image: liqo-discovery:$old\$" manifests | xargs -r sed -i "s#image: liqo-discovery:$old\$#image: liqo-discovery:$new#"
sed -i -e "s#targetRevision: v$old\$#targetRevision: v$new#" -e "s#tag: v$old\$#tag: v$new#" manifests/gitops/*.yaml
echo "version $old → $(image/version.sh)"
