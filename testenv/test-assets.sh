#!/usr/bin/env bash
# The Kubernetes binaries the real tier and the node tier run (`just test-assets [VERSION]
# [DIR]`), fetched and checked against their published checksums, in one folder:
#
#   kube-apiserver, etcd        envtest's release archive (controller-tools' release index,
#                               as controller-runtime's setup-envtest reads it; SHA-512)
#   kube-controller-manager,    Kubernetes' release binaries of the same version (dl.k8s.io,
#   kube-scheduler, kubelet,    each beside its .sha256)
#   kube-proxy
#
# VERSION: a release (1.36.2) or a minor (1.36: its newest in the index; the default). DIR
# (default ~/.local/share/liqo-test-assets/<version>-linux-<arch>) is filled only once every
# file is verified: a checksum that does not match fails the run and leaves DIR as it was.
# Prints `KUBEBUILDER_ASSETS=DIR` last; `cargo test` with it runs the real tier, the node tier
# needs the other four (docs/testing.md). Linux only (amd64, arm64).
#
# Where from (for a mirror): LIQO_ENVTEST_INDEX (the index's URL) and LIQO_K8S_RELEASES (the
# base URL of Kubernetes' releases). curl honours CURL_CA_BUNDLE for a mirror's own CA.
set -euo pipefail

index_url="${LIQO_ENVTEST_INDEX:-https://raw.githubusercontent.com/kubernetes-sigs/controller-tools/HEAD/envtest-releases.yaml}"
releases="${LIQO_K8S_RELEASES:-https://dl.k8s.io/release}"
wanted="${1:-1.36}"
wanted="${wanted#v}"
case "$(uname -m)" in
  x86_64) arch=amd64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) echo "test-assets: no Kubernetes release binaries for $(uname -m)" >&2; exit 1 ;;
esac
[ "$(uname -s)" = Linux ] || { echo "test-assets: Linux only (the node tier's binaries are Linux's)" >&2; exit 1; }
for tool in curl sha256sum sha512sum tar awk; do
  command -v "$tool" >/dev/null 2>&1 || { echo "test-assets: needs $tool" >&2; exit 1; }
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fetch() { # URL FILE
  curl -fsSL --retry 3 --connect-timeout 20 -o "$2" "$1" || { echo "test-assets: could not fetch $1" >&2; exit 1; }
}
check() { # FILE EXPECTED TOOL
  local got
  got="$("$3" "$1" | cut -d' ' -f1)"
  if [ "$got" != "$2" ]; then
    echo "test-assets: checksum mismatch for $(basename "$1"): expected $2, got $got; nothing installed" >&2
    exit 1
  fi
}

echo "test-assets: the envtest release index: $index_url" >&2
fetch "$index_url" "$work/index.yaml"
# Each release's archive for this platform, as "VERSION URL HASH" (the index is YAML of three
# levels: releases > vX.Y.Z > envtest-vX.Y.Z-OS-ARCH.tar.gz > hash, selfLink).
awk -v want="-linux-$arch.tar.gz:" '
  /^  v[0-9]/ { v = $1; sub(/^v/, "", v); sub(/:$/, "", v) }
  /^    envtest-/ { on = index($1, want) > 0; url = ""; hash = "" }
  on && $1 == "hash:" { hash = $2 }
  on && $1 == "selfLink:" { url = $2 }
  on && url != "" && hash != "" { print v, url, hash; on = 0 }' "$work/index.yaml" >"$work/archives"
if [[ "$wanted" =~ ^[0-9]+\.[0-9]+$ ]]; then
  line="$(awk -v m="$wanted." 'index($1, m) == 1' "$work/archives" | sort -V -k1,1 | tail -n 1)"
else
  line="$(awk -v v="$wanted" '$1 == v' "$work/archives" | head -n 1)"
fi
if [ -z "$line" ]; then
  echo "test-assets: no envtest release $wanted for linux-$arch in the index; it has: $(cut -d' ' -f1 "$work/archives" | sort -V | tr '\n' ' ')" >&2
  exit 1
fi
read -r version url hash <<<"$line"
dir="${2:-$HOME/.local/share/liqo-test-assets/$version-linux-$arch}"
echo "test-assets: Kubernetes $version (linux-$arch) into $dir" >&2

mkdir -p "$work/out"
archive="$work/${url##*/}"
fetch "$url" "$archive"
check "$archive" "$hash" sha512sum
tar -xzf "$archive" -C "$work"
for b in kube-apiserver etcd; do
  found="$(find "$work" -path "$work/out" -prune -o -type f -name "$b" -print | head -n 1)"
  [ -n "$found" ] || { echo "test-assets: the envtest archive has no $b" >&2; exit 1; }
  install -m 0755 "$found" "$work/out/$b"
done
for b in kube-controller-manager kube-scheduler kubelet kube-proxy; do
  fetch "$releases/v$version/bin/linux/$arch/$b.sha256" "$work/$b.sha256"
  fetch "$releases/v$version/bin/linux/$arch/$b" "$work/out/$b"
  check "$work/out/$b" "$(cut -d' ' -f1 "$work/$b.sha256")" sha256sum
  chmod 0755 "$work/out/$b"
done
for b in kube-apiserver etcd kube-controller-manager kube-scheduler kubelet kube-proxy; do
  echo "  $b  $(sha256sum "$work/out/$b" | cut -d' ' -f1)" >&2
done

mkdir -p "$dir"
for b in "$work"/out/*; do mv -f "$b" "$dir/"; done
echo "test-assets: verified; run the tests with:" >&2
echo "KUBEBUILDER_ASSETS=$dir"
