#!/usr/bin/env bash
# Builds the container image with podman or docker (LIQO_ENGINE=podman or docker picks one;
# unset: podman when installed, else docker): `liqo` (image/, every command in one static
# binary) built by cargo for this machine's target (Linux only) with a static C library, staged
# with its links, CA certificates and the nonroot user into target/image/rootfs, and copied into
# an image FROM scratch (image/Containerfile).
#
#   image/build.sh [IMAGE]      IMAGE defaults to liqo-discovery:<version of Cargo.toml>
#
# Prints the image reference as its last line.
set -euo pipefail
cd "$(dirname "$0")/.."

version="$(image/version.sh)"
image="${1:-liqo-discovery:$version}"
engine="${LIQO_ENGINE:-}"
if [ -z "$engine" ]; then
  if command -v podman >/dev/null 2>&1; then engine=podman
  elif command -v docker >/dev/null 2>&1; then engine=docker
  else
    echo "image/build.sh: neither podman nor docker is installed" >&2
    exit 1
  fi
fi

target="$(rustc -vV | sed -n 's/^host: //p')"
case "$target" in
  *-linux-*) ;;
  *)
    echo "image/build.sh: this machine's target is $target: the image's binary is built for the machine that builds it" >&2
    echo "and must be a Linux one. Build on Linux: a Linux VM or builder (docs/install.md#the-image)." >&2
    exit 1
    ;;
esac
echo "building liqo $version for $target (static, profile image)" >&2
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
  cargo build --locked --profile image --target "$target" -p liqo-image >&2
binary="${CARGO_TARGET_DIR:-target}/$target/image/liqo"
if ! file "$binary" 2>/dev/null | grep -q 'static'; then
  # `file` may be missing; ldd then says whether anything is loaded at run time.
  if ldd "$binary" >/dev/null 2>&1; then
    echo "image/build.sh: $binary is not statically linked" >&2
    exit 1
  fi
fi

root=target/image/rootfs
rm -rf "$root"
mkdir -p "$root/etc/ssl/certs"
cp "$binary" "$root/liqo"
for command in webhook reconciler certs dashboard; do
  ln -s liqo "$root/liqo-$command"
done
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$root/etc/group"
# Peers whose auth service has a certificate of a public CA (behind an Ingress) are verified
# with these; the reconciler reads them from the standard path.
bundle=/etc/ssl/certs/ca-certificates.crt
if [ -f "$bundle" ]; then
  cp "$bundle" "$root/etc/ssl/certs/ca-certificates.crt"
else
  echo "image/build.sh: warning: $bundle not found; the image trusts no public CA" >&2
fi

build=("$engine" build)
if [ "$engine" = podman ]; then
  # No RUN step, so no isolation is needed; chroot works where the host allows no user namespace.
  build+=(--isolation chroot)
fi
"${build[@]}" --file image/Containerfile --build-arg "VERSION=$version" --tag "$image" "$root" >&2
bytes="$(du -sb --apparent-size "$root" | cut -f1)"
echo "image $image: $((bytes / 1024 / 1024)) MiB ($bytes bytes: liqo $(stat -c %s "$root/liqo"), CA bundle $(stat -c %s "$root/etc/ssl/certs/ca-certificates.crt" 2>/dev/null || echo 0))" >&2
echo "$image"
