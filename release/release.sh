#!/usr/bin/env bash
# Release artifacts of the kubectl plugin: for each target, kubectl-liqo (static on Linux) in
# kubectl-liqo-<version>-<os>-<arch>.tar.gz with the LICENSE, their SHA-256 sums, and a krew
# plugin manifest pointing at them, all in dist/<version>/:
#
#   release/release.sh VERSION        (just release VERSION)
#
#   dist/VERSION/kubectl-liqo-VERSION-linux-amd64.tar.gz
#   dist/VERSION/SHA256SUMS
#   dist/VERSION/plugins/liqo.yaml    kubectl krew install --manifest=… --archive=…
#
# VERSION must be [workspace.package] version of Cargo.toml (image/version.sh), where every
# version comes from. LIQO_RELEASE_URL is where the archives will be downloaded from (the krew
# manifest's uri; default: the dist folder, for `--archive` installs). LIQO_RELEASE_TARGETS
# lists Rust targets (default: this machine's); each must be installed (`rustup target add`)
# with a linker for it:
#   x86_64-unknown-linux-gnu → linux/amd64      aarch64-unknown-linux-gnu → linux/arm64
#   x86_64-apple-darwin → darwin/amd64          aarch64-apple-darwin → darwin/arm64
#   x86_64-pc-windows-gnu → windows/amd64 (kubectl-liqo.exe)
# Archives are reproducible for a given binary (sorted, owner 0, mtime SOURCE_DATE_EPOCH or the
# last commit's time, gzip without a name or time). LIQO_DIST_DIR writes elsewhere than
# dist/VERSION; LIQO_RELEASE_BINARY packages a kubectl-liqo already built (one target) instead of
# building it (image/tests/release.rs does, with the binary its test run built).
set -euo pipefail
cd "$(dirname "$0")/.."

version="${1:-}"
version="${version#v}"
workspace="$(image/version.sh)"
if [ -z "$version" ]; then
  echo "usage: release/release.sh VERSION   (the version in Cargo.toml is $workspace)" >&2
  exit 2
fi
if [ "$version" != "$workspace" ]; then
  echo "release/release.sh: VERSION $version is not the version in Cargo.toml ($workspace)." >&2
  echo "Set [workspace.package] version (and the manifests' image tags: release/set-version.sh $version) first." >&2
  exit 1
fi

dist="${LIQO_DIST_DIR:-dist/$version}"
mkdir -p "$dist"
dist="$(cd "$dist" && pwd)"
base_url="${LIQO_RELEASE_URL:-file://$dist}"
targets="${LIQO_RELEASE_TARGETS:-$(rustc -vV | sed -n 's/^host: //p')}"
epoch="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"
rm -rf "${dist:?}"/kubectl-liqo-* "$dist/SHA256SUMS" "$dist/plugins"
mkdir -p "$dist/plugins"

platform() { # target → "os arch exe-suffix"
  case "$1" in
    x86_64-unknown-linux-*) echo "linux amd64 " ;;
    aarch64-unknown-linux-*) echo "linux arm64 " ;;
    x86_64-apple-darwin) echo "darwin amd64 " ;;
    aarch64-apple-darwin) echo "darwin arm64 " ;;
    x86_64-pc-windows-*) echo "windows amd64 .exe" ;;
    *) echo "release/release.sh: no krew platform for target $1" >&2; return 1 ;;
  esac
}

platforms=""
for target in $targets; do
  p="$(platform "$target")"
  read -r os arch exe <<<"$p "
  flags="${RUSTFLAGS:-}"
  case "$target" in *-linux-gnu) flags="$flags -C target-feature=+crt-static" ;; esac
  binary="${LIQO_RELEASE_BINARY:-}"
  if [ -z "$binary" ]; then
    echo "building kubectl-liqo $version for $target ($os/$arch)" >&2
    RUSTFLAGS="$flags" cargo build --locked --profile image --target "$target" -p liqo-cli >&2
    binary="${CARGO_TARGET_DIR:-target}/$target/image/kubectl-liqo$exe"
  fi
  name="kubectl-liqo-$version-$os-$arch"
  stage="$dist/$name"
  mkdir -p "$stage"
  cp "$binary" "$stage/kubectl-liqo$exe"
  cp LICENSE "$stage/LICENSE"
  tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner -C "$stage" -cf - "kubectl-liqo$exe" LICENSE | gzip -9n >"$dist/$name.tar.gz"
  rm -rf "$stage"
  sum="$(sha256sum "$dist/$name.tar.gz" | cut -d' ' -f1)"
  platforms+="  - selector:
      matchLabels:
        os: $os
        arch: $arch
    uri: $base_url/$name.tar.gz
    sha256: $sum
    bin: kubectl-liqo$exe
"
done
(cd "$dist" && sha256sum -- *.tar.gz >SHA256SUMS)

cat >"$dist/plugins/liqo.yaml" <<YAML
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: liqo
spec:
  version: v$version
  shortDescription: Discover Kubernetes clusters and peer them (Liqo discovery protocol)
  description: |
    kubectl liqo drives Liqo discovery and peering on this cluster: status of this cluster and
    its peers, peer and unpeer (following each phase live), trust a peer's CA by fingerprint,
    discover clusters by mDNS on the LAN or DNS-SD in a domain, manage SearchDomains, turn
    discovery, advertisement and autojoin on or off, and a live dashboard in the browser.
    It needs Liqo's webhook and reconciler installed in the cluster.
  caveats: |
    Liqo's webhook and reconciler must run in the cluster (kubectl apply -k manifests/).
    Start with: kubectl liqo status
  platforms:
$platforms
YAML
echo "$dist/plugins/liqo.yaml" >&2
ls -l "$dist" >&2
cat "$dist/SHA256SUMS" >&2
echo "$dist"
