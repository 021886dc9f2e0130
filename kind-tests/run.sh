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
say() { printf '\n=== %s\n' "$*"; }
fail() { echo "FAILED: $*" >&2; exit 1; }
ka() { kubectl --context "kind-$A" "$@"; }
kb() { kubectl --context "kind-$B" "$@"; }

# wait_for SECONDS DESCRIPTION COMMAND...: run COMMAND every 2 s until it succeeds.
wait_for() {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || fail "timed out waiting for $what"
    sleep 2
  done
  echo "ok: $what"
}

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

node_ip() { docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$1-control-plane"; }

install() {
  local c=$1 k="kubectl --context kind-$1" ip
  ip=$(node_ip "$c")
  say "install on $c ($ip)"
  # CRDs first so the default ClusterConfig finds its kind; then the whole base.
  $k apply -k manifests/crds
  $k wait --for condition=established --timeout=60s crd --all
  $k kustomize manifests | sed "s#image: liqo-discovery:.*#image: $IMAGE#" | $k apply -f -
  $k apply -k manifests/config
  $k -n liqo wait --for=condition=complete --timeout=180s job/liqo-certs
  local port
  port=$($k -n liqo get service liqo-auth -o jsonpath='{.spec.ports[0].nodePort}')
  # Peers reach this cluster's API server and auth service on the node's address.
  $k -n liqo set env deployment/liqo-reconciler \
    LIQO_API_URL="https://$ip:6443" LIQO_AUTH_URL="https://$ip:$port"
  $k -n liqo rollout status deployment/liqo-webhook --timeout=180s
  $k -n liqo rollout status deployment/liqo-reconciler --timeout=180s
}

discovery() { # CLUSTER true|false
  kubectl --context "kind-$1" patch clusterconfigs liqo-configuration --type merge \
    -p "{\"spec\":{\"discoveryConfig\":{\"enableDiscovery\":$2,\"enableAdvertisement\":$2}}}"
}

install "$A"
install "$B"
discovery "$A" false
discovery "$B" false
ID_A=$(ka -n liqo get configmap cluster-id -o jsonpath='{.data.cluster-id}')
ID_B=$(kb -n liqo get configmap cluster-id -o jsonpath='{.data.cluster-id}')
[ -n "$ID_A" ] && [ -n "$ID_B" ] || fail "cluster IDs not created"
echo "A=$ID_A B=$ID_B"

fc_joined() { # CONTEXT-FN NAME
  [ "$("$1" get foreigncluster "$2" -o jsonpath='{.status.outgoing.joined}')" = true ]
}
has() { "$@" >/dev/null 2>&1; }
hasnt() { ! "$@" >/dev/null 2>&1; }

say "manual peering via authUrl: A joins B"
AUTH_B="https://$(node_ip "$B"):$(kb -n liqo get service liqo-auth -o jsonpath='{.spec.ports[0].nodePort}')"
cat <<EOF | ka apply -f -
apiVersion: discovery.liqo.io/v1alpha1
kind: ForeignCluster
metadata:
  name: cluster-b
spec:
  authUrl: "$AUTH_B"
  join: true
  allowUntrustedCA: true
EOF
wait_for 180 "A's ForeignCluster cluster-b joined" fc_joined ka cluster-b
wait_for 60 "PeeringRequest $ID_A in B" has kb get peeringrequest "$ID_A"
wait_for 120 "Advertisement of B in A" has ka get advertisement "advertisement-$ID_B"
ka get foreignclusters

say "webhook: a forged PeeringRequest is rejected"
FAKE=00000000-0000-4000-8000-000000000001
forged=$(cat <<EOF | kb create --as "system:serviceaccount:liqo:remote-$ID_A" -f - 2>&1 || true
apiVersion: discovery.liqo.io/v1alpha1
kind: PeeringRequest
metadata:
  name: $FAKE
spec:
  clusterIdentity:
    clusterID: $FAKE
  namespace: liqo
  kubeConfigRef:
    name: forged
    namespace: liqo
EOF
)
echo "$forged"
echo "$forged" | grep -q 'denied the request' || fail "the forged PeeringRequest was not denied by the webhook"
hasnt kb get peeringrequest "$FAKE" || fail "the forged PeeringRequest exists"

say "unjoin cascade"
ka patch foreigncluster cluster-b --type merge -p '{"spec":{"join":false}}'
wait_for 120 "PeeringRequest $ID_A gone from B" hasnt kb get peeringrequest "$ID_A"
wait_for 120 "Advertisement of B gone from A" hasnt ka get advertisement "advertisement-$ID_B"
wait_for 60 "cluster-b no longer joined" bash -c "[ \"\$(kubectl --context kind-$A get foreigncluster cluster-b -o jsonpath='{.status.outgoing.joined}')\" != true ]"
ka delete foreigncluster cluster-b --wait --timeout=120s

say "LAN discovery on kind's Docker network"
discovery "$A" true
discovery "$B" true
wait_for 120 "A discovered B on the LAN" bash -c "[ \"\$(kubectl --context kind-$A get foreigncluster $ID_B -o jsonpath='{.spec.discoveryType}')\" = LAN ]"
wait_for 120 "B discovered A on the LAN" has kb get foreigncluster "$ID_A"
wait_for 180 "A joined B (autojoin)" fc_joined ka "$ID_B"
wait_for 180 "B joined A (autojoin)" fc_joined kb "$ID_A"

say "kubectl get foreignclusters"
ka get foreignclusters
out=$(ka get foreignclusters)
echo "$out" | head -1 | grep -q 'CLUSTER-ID' || fail "no CLUSTER-ID column"
echo "$out" | grep "$ID_B" | grep -q 'LAN' || fail "B not listed as LAN"

say "delete a ForeignCluster while the other cluster is stopped"
discovery "$A" false   # or A would find B again as soon as it returns
docker stop "$B-control-plane"
ka delete foreigncluster "$ID_B" --wait --timeout=300s || fail "ForeignCluster $ID_B not deleted with B stopped"
hasnt ka get foreigncluster "$ID_B" || fail "ForeignCluster $ID_B still there"
hasnt ka get advertisement "advertisement-$ID_B" || fail "Advertisement of B still there"
docker start "$B-control-plane"

say "PASSED: kind two-cluster suite"
