#!/usr/bin/env bash
# Sets the version of everything that ships: [workspace.package] version in Cargo.toml (where
# the binaries, the image and the archives read it), Cargo.lock, the image tag in every
# manifest under manifests/ (api/tests/manifests.rs fails when one disagrees), and the examples
# of the README, docs/ and the plugin's help. CHANGELOG.md's newest entry is written by hand
# (api/tests/changelog.rs fails until it names the new version).
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
# The examples of the README, docs/ and the plugin's help name the version too.
grep -rlE "liqo-discovery:$old|v$old|Liqo $old is installed|kubectl liqo $old|release $old|dist/$old|liqo-$old-" README.md docs cli/src | xargs -r sed -i -E \
  -e "s#liqo-discovery:$old#liqo-discovery:$new#g" -e "s#v$old([^0-9]|\$)#v$new\1#g" -e "s#Liqo $old is installed#Liqo $new is installed#g" \
  -e "s#kubectl liqo $old\$#kubectl liqo $new#g" -e "s#release $old#release $new#g" -e "s#dist/$old#dist/$new#g" -e "s#liqo-$old-#liqo-$new-#g"
echo "version $old → $(image/version.sh)"
