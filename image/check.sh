#!/usr/bin/env bash
# Builds the image (image/build.sh) and starts each of its commands in it as the manifests do:
# user 65532, read-only root filesystem, no network, no capabilities. Checks:
#   - every command's --version prints its name and the version of Cargo.toml;
#   - the image runs as 65532:65532, carries the version label, and weighs at most 30 MiB;
#   - liqo-certs writes a CA and a serving certificate into a mounted folder (a real command,
#     not only --version), and `liqo` called by its own name says how to use it (exit 2).
# Skips loudly (exit 0) where no container engine can run here.
set -euo pipefail
cd "$(dirname "$0")/.."

engine="${LIQO_ENGINE:-}"
if [ -z "$engine" ]; then
  if command -v podman >/dev/null 2>&1; then engine=podman
  elif command -v docker >/dev/null 2>&1; then engine=docker
  fi
fi
if [ -z "$engine" ] || ! "$engine" info >/dev/null 2>&1; then
  echo "SKIPPED: image check: no container engine can run here (podman or docker: ${engine:-none installed})" >&2
  exit 0
fi
export LIQO_ENGINE="$engine"

version="$(image/version.sh)"
image="$(image/build.sh "liqo-discovery:$version" | tail -n 1)"
fail() { echo "FAILED: image check: $*" >&2; exit 1; }

run=("$engine" run --rm --read-only --network none --cap-drop ALL --security-opt no-new-privileges)
if [ "$engine" = podman ]; then run+=(--runtime "${LIQO_OCI_RUNTIME:-runc}"); fi

for command in liqo-webhook liqo-reconciler liqo-certs liqo-dashboard; do
  out="$("${run[@]}" --entrypoint "/$command" "$image" --version 2>&1)" || fail "$command --version: $out"
  [ "$out" = "$command $version" ] || fail "$command --version printed '$out', not '$command $version'"
  echo "ok: $command --version → $out"
done

out="$("${run[@]}" --entrypoint /liqo "$image" 2>&1)" && fail "/liqo without a command exited 0: $out"
case "$out" in *"usage: liqo <webhook|reconciler|certs|dashboard>"*) echo "ok: /liqo alone prints its usage" ;;
  *) fail "/liqo without a command printed: $out" ;; esac

user="$("$engine" image inspect --format '{{.Config.User}}' "$image")"
[ "$user" = "65532:65532" ] || fail "the image's user is '$user'"
label="$("$engine" image inspect --format '{{index .Config.Labels "org.opencontainers.image.version"}}' "$image")"
[ "$label" = "$version" ] || fail "the image's version label is '$label', not $version"
bytes="$("$engine" image inspect --format '{{.Size}}' "$image")"
[ "$bytes" -le $((30 * 1024 * 1024)) ] || fail "the image weighs $bytes bytes, over 30 MiB"
echo "ok: user $user, label $label, size $((bytes / 1024 / 1024)) MiB ($bytes bytes)"

dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
chmod 0777 "$dir"
"${run[@]}" -v "$dir:/out" --entrypoint /liqo-certs "$image" issue --dir /out --host webhook.example \
  || fail "liqo-certs issue in the image"
for f in ca.crt ca.key tls.crt tls.key; do [ -s "$dir/$f" ] || fail "liqo-certs issue wrote no $f"; done
if command -v openssl >/dev/null 2>&1; then
  openssl verify -CAfile "$dir/ca.crt" "$dir/tls.crt" >/dev/null || fail "the certificate made in the image does not verify"
fi
echo "ok: liqo-certs issue in the image wrote a CA and a serving certificate that verifies"
echo "image check passed: $image"
