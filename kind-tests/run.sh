#!/usr/bin/env bash
# Two-cluster end-to-end suite on kind (`just e2e`). Needs Docker, kind (>= 0.23) and kubectl
# (>= 1.30); skips loudly without them. Every wait is on a condition, with a deadline.
#
#   1. build the image, create clusters liqo-a and liqo-b, load the image, `kubectl apply -k`
#   2. manual peering via authUrl (LAN discovery off): A joins B
#   3. the webhook: a PeeringRequest from B's identity accepted; a forged one (A's identity
#      claiming another cluster ID) rejected with our message
#   4. unjoin cascade: join=false removes B's PeeringRequest of A and A's Advertisement of B
#   5. LAN discovery on kind's Docker network: both clusters find each other and peer
#   6. `kubectl get foreignclusters` output
#   7. deleting a ForeignCluster while the other cluster is stopped still completes
#
# KEEP=1 keeps the clusters afterwards; IMAGE=... uses an image already built.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1 || missing+=("a running Docker engine")
command -v kind >/dev/null 2>&1 || missing+=("kind")
command -v kubectl >/dev/null 2>&1 || missing+=("kubectl")
if [ ${#missing[@]} -gt 0 ]; then
  list=$(printf '%s, ' "${missing[@]}")
  echo "SKIPPED: kind-tests need ${list%, } (not present on this machine)" >&2
  exit 0
fi

IMAGE=${IMAGE:-liqo-discovery:e2e}
A=liqo-a
B=liqo-b
. kind-tests/checks.sh
ka() { kubectl --context "kind-$A" "$@"; }
kb() { kubectl --context "kind-$B" "$@"; }
cluster_name() { case "$1" in A) echo "$A" ;; B) echo "$B" ;; esac; }
addr() { docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$(cluster_name "$1")-control-plane"; }
partition() { docker stop "$B-control-plane" >/dev/null; }
heal() { docker start "$B-control-plane" >/dev/null; }

cleanup() {
  if [ "${KEEP:-0}" != 1 ]; then
    kind delete cluster --name "$A" >/dev/null 2>&1 || true
    kind delete cluster --name "$B" >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT

say "image $IMAGE"
if [ -z "$(docker images -q "$IMAGE")" ]; then
  LIQO_ENGINE=docker image/build.sh "$IMAGE" >/dev/null
fi

for c in "$A" "$B"; do
  say "cluster $c"
  kind get clusters 2>/dev/null | grep -qx "$c" || kind create cluster --name "$c" --wait 180s
  kind load docker-image "$IMAGE" --name "$c"
done

install A
install B
check_peering
check_lan
check_delete_while_unreachable

say "PASSED: kind two-cluster suite"
