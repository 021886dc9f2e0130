# The two-cluster checks, shared by the kind suite (run.sh) and the node tier (e2e-node.sh):
# sourced, not run. The caller defines:
#   ka, kb            kubectl for cluster A and cluster B
#   addr A|B          the address peers reach that cluster's node at
#   partition, heal   make B unreachable from A, and reachable again
#   IMAGE             the image the manifests should run (replaces liqo-discovery:<version>)
# and then calls install A; install B; check_peering; check_lan; check_delete_while_unreachable.

. kind-tests/lib.sh

k_of() { case "$1" in A) echo ka ;; B) echo kb ;; *) fail "no cluster $1" ;; esac; }

# stuck K WHAT: what the Liqo namespace shows (pods, the certificates Job's log, recent
# Events) and the disk this machine has left, then fails saying WHAT did not finish.
stuck() {
  local k=$1
  echo "--- pods in liqo:" >&2
  "$k" -n liqo get pods -o wide >&2 2>&1 || true
  echo "--- the liqo-certs Job's log:" >&2
  "$k" -n liqo logs job/liqo-certs --tail=30 >&2 2>&1 || true
  echo "--- the last Events in liqo:" >&2
  "$k" -n liqo get events --sort-by=.lastTimestamp 2>&1 | tail -25 >&2 || true
  echo "--- the node's taints and conditions:" >&2
  "$k" get nodes -o jsonpath='{range .items[*]}{.metadata.name}: {.spec.taints[*].key} {range .status.conditions[?(@.status=="True")]}{.type} {end}{"\n"}{end}' >&2 2>&1 || true
  echo "--- disk:" >&2
  df -h / >&2 || true
  fail "$2"
}

# render DIR: the kustomization with our image as IMAGE.
render() { ka kustomize "$1" | sed "s#image: liqo-discovery:.*#image: $IMAGE#"; }

# env_configmap A|B: ConfigMap liqo-reconciler-env says the node's address and the liqo-auth
# NodePort (true when it had to be written).
env_configmap() {
  local k ip port
  k=$(k_of "$1")
  ip=$(addr "$1")
  port=$("$k" -n liqo get service liqo-auth -o jsonpath='{.spec.ports[0].nodePort}' 2>/dev/null) || return 1
  [ "$("$k" -n liqo get configmap liqo-reconciler-env -o jsonpath='{.data.LIQO_AUTH_URL}' 2>/dev/null)" = "https://$ip:$port" ] && return 1
  "$k" -n liqo create configmap liqo-reconciler-env --from-literal=LIQO_API_URL="https://$ip:6443" \
    --from-literal=LIQO_AUTH_URL="https://$ip:$port" --dry-run=client -o yaml | "$k" apply -f - >/dev/null
}

# install A|B [MANIFESTS]: CRDs, the base and the default ClusterConfig as the README says (an
# upgrade as its Upgrades section says), with LAN discovery off (the checks peer by hand
# first); waits for the certificates Job, the webhook and the reconciler. Manifests whose
# reconciler does not find its own addresses (before NODE_NAME) are told them, as their README
# said: ConfigMap liqo-reconciler-env, or `kubectl set env` before that ConfigMap existed.
install() {
  local c=$1 manifests=${2:-manifests} k ip port old_style=false changed=false finds=false
  k=$(k_of "$c")
  ip=$(addr "$c")
  say "install on $c ($ip) from $manifests"
  case "$(render "$manifests")" in *"name: LIQO_API_URL"*) old_style=true ;; esac
  case "$(render "$manifests")" in *"name: NODE_NAME"*) finds=true ;; esac
  "$k" apply -k "$manifests/crds" >/dev/null
  "$k" wait --for condition=established --timeout=60s crd --all >/dev/null
  # The default ClusterConfig before the reconciler, with LAN discovery off: the checks peer
  # by hand first (check_lan turns it on). Its kind is served a moment after it is established.
  wait_for 30 "the default ClusterConfig applied on $c" "$k" apply -k "$manifests/config"
  discovery "$c" false
  # An upgrade: the addresses are in place before the new reconciler starts, and a finished
  # certificates Job still there is deleted (its pod template is immutable).
  [ $old_style = false ] && [ $finds = false ] && env_configmap "$c" && changed=true
  "$k" -n liqo delete job liqo-certs --ignore-not-found --wait >/dev/null
  render "$manifests" | "$k" apply -f - >/dev/null
  "$k" -n liqo wait --for=condition=complete --timeout=180s job/liqo-certs >/dev/null || stuck "$k" "job liqo-certs on $c"
  if [ $old_style = true ]; then
    port=$("$k" -n liqo get service liqo-auth -o jsonpath='{.spec.ports[0].nodePort}')
    "$k" -n liqo set env deployment/liqo-reconciler LIQO_API_URL="https://$ip:6443" LIQO_AUTH_URL="https://$ip:$port" >/dev/null
  elif [ $finds = false ]; then
    env_configmap "$c" && changed=true
    # A first install: the reconciler started before the ConfigMap could name the NodePort.
    [ $changed = true ] && "$k" -n liqo rollout restart deployment/liqo-reconciler >/dev/null
  fi
  "$k" -n liqo rollout status deployment/liqo-webhook --timeout=180s >/dev/null || stuck "$k" "webhook rollout on $c"
  "$k" -n liqo rollout status deployment/liqo-reconciler --timeout=180s >/dev/null || stuck "$k" "reconciler rollout on $c"
  wait_for 60 "the reconciler of $c ready and leading" leading "$c"
}

# leading A|B: the Lease is held by a running reconciler pod.
leading() {
  local k holder
  k=$(k_of "$1")
  holder=$("$k" -n liqo get lease liqo-reconciler -o jsonpath='{.spec.holderIdentity}')
  [ -n "$holder" ] && [ "$("$k" -n liqo get pod "$holder" -o jsonpath='{.status.phase}' 2>/dev/null)" = Running ]
}

# health_round A|B: the leading reconciler has checked a joined peer's health at least once
# (its metrics, through the API server's proxy to the pod).
health_round() {
  local k holder
  k=$(k_of "$1")
  holder=$("$k" -n liqo get lease liqo-reconciler -o jsonpath='{.spec.holderIdentity}')
  "$k" get --raw "/api/v1/namespaces/liqo/pods/$holder:8080/proxy/metrics" \
    | grep -q '^liqo_reconciler_peer_health_check_duration_seconds_count{result="ok"} [1-9]'
}

# discovery A|B true|false: LAN discovery (browsing) on or off; advertising stays on (it also
# lets the broadcaster publish Advertisements to peers).
discovery() {
  "$(k_of "$1")" patch clusterconfigs liqo-configuration --type merge \
    -p "{\"spec\":{\"discoveryConfig\":{\"enableDiscovery\":$2}}}" >/dev/null
}

cluster_id() { "$(k_of "$1")" -n liqo get configmap cluster-id -o jsonpath='{.data.cluster-id}'; }
auth_url() { echo "https://$(addr "$1"):$("$(k_of "$1")" -n liqo get service liqo-auth -o jsonpath='{.spec.ports[0].nodePort}')"; }

fc_joined() { # A|B NAME
  [ "$("$(k_of "$1")" get foreigncluster "$2" -o jsonpath='{.status.outgoing.joined}')" = true ]
}
fc_not_joined() { ! fc_joined "$@"; }
# named A|B KIND NAME: an object of KIND named NAME exists in any namespace (PeeringRequests and
# Advertisements are in tenant namespaces since 0.2, cluster-scoped before).
named() { [ -n "$("$(k_of "$1")" get "$2" -A --field-selector "metadata.name=$3" -o name 2>/dev/null)" ]; }
not_named() { ! named "$@"; }
tenant_of() { echo "liqo-tenant-$1"; }
# in_tenant A|B KIND-PATH NAMESPACE NAME: the object is at that path (`kubectl get --raw`: kubectl's
# discovery cache may still say these kinds are cluster-scoped, from an install of 0.1 minutes
# before, and would send a namespaced get to the cluster-scoped path).
in_tenant() { "$(k_of "$1")" get --raw "/apis/$2" >/dev/null 2>&1; }
request_in_tenant() { in_tenant "$1" "discovery.liqo.io/v1alpha1/namespaces/$(tenant_of "$2")/peeringrequests/$2"; }
advertisement_in_tenant() { in_tenant "$1" "sharing.liqo.io/v1alpha1/namespaces/$(tenant_of "$2")/advertisements/advertisement-$2"; }
fc_lan() { [ "$("$(k_of "$1")" get foreigncluster "$2" -o jsonpath='{.spec.discoveryType}')" = LAN ]; }

# peer_a_with_b NAME: A joins B through B's NodePort auth service (LAN discovery off).
peer_a_with_b() {
  local name=$1
  cat <<EOF | ka apply -f - >/dev/null
apiVersion: discovery.liqo.io/v1alpha1
kind: ForeignCluster
metadata:
  name: $name
spec:
  authUrl: "$(auth_url B)"
  join: true
  allowUntrustedCA: true
EOF
  wait_for 180 "A's ForeignCluster $name joined" fc_joined A "$name"
  wait_for 60 "PeeringRequest $(cluster_id A) in B" named B peeringrequest "$(cluster_id A)"
  wait_for 120 "Advertisement of B in A" named A advertisement "advertisement-$(cluster_id B)"
}

check_peering() {
  local id_a id_b
  discovery A false
  discovery B false
  id_a=$(cluster_id A)
  id_b=$(cluster_id B)
  [ -n "$id_a" ] && [ -n "$id_b" ] || fail "cluster IDs not created"
  echo "A=$id_a B=$id_b"

  say "manual peering via authUrl: A joins B"
  has ka get foreigncluster cluster-b || peer_a_with_b cluster-b
  wait_for 180 "A's ForeignCluster cluster-b joined" fc_joined A cluster-b
  ka get foreignclusters

  say "tenant namespaces: A's on B holds its request, B's on A its Advertisement"
  request_in_tenant B "$id_a" || fail "A's PeeringRequest is not in its tenant namespace on B"
  advertisement_in_tenant A "$id_b" || fail "B's Advertisement is not in its tenant namespace on A"
  [ "$(ka get foreigncluster cluster-b -o jsonpath='{.status.tenantNamespace.local}/{.status.tenantNamespace.remote}')" = "$(tenant_of "$id_b")/$(tenant_of "$id_a")" ] \
    || fail "A's ForeignCluster does not name both tenant namespaces: $(ka get foreigncluster cluster-b -o jsonpath='{.status.tenantNamespace}')"
  [ -z "$(ka get clusterrolebinding -l discovery.liqo.io/cluster-id -o name)$(kb get clusterrolebinding -l discovery.liqo.io/cluster-id -o name)" ] \
    || fail "a ClusterRoleBinding was made for a peer"

  say "webhook: a forged PeeringRequest is rejected"
  local fake=00000000-0000-4000-8000-000000000001 forged
  local tenant_a
  tenant_a=$(tenant_of "$id_a")
  forged=$(kb create --as "system:serviceaccount:$tenant_a:remote-$id_a" --raw "/apis/discovery.liqo.io/v1alpha1/namespaces/$tenant_a/peeringrequests" -f - 2>&1 <<EOF || true
{"apiVersion": "discovery.liqo.io/v1alpha1", "kind": "PeeringRequest",
 "metadata": {"name": "$fake", "namespace": "$tenant_a"},
 "spec": {"clusterIdentity": {"clusterID": "$fake"}, "namespace": "liqo",
          "kubeConfigRef": {"name": "forged", "namespace": "$tenant_a"}}}
EOF
)
  echo "$forged"
  echo "$forged" | grep -q 'denied the request' || fail "the forged PeeringRequest was not denied by the webhook"
  not_named B peeringrequest "$fake" || fail "the forged PeeringRequest exists"

  say "unjoin cascade"
  ka patch foreigncluster cluster-b --type merge -p '{"spec":{"join":false}}' >/dev/null
  wait_for 120 "PeeringRequest $id_a gone from B" not_named B peeringrequest "$id_a"
  wait_for 120 "Advertisement of B gone from A" not_named A advertisement "advertisement-$id_b"
  wait_for 60 "cluster-b no longer joined" fc_not_joined A cluster-b
  wait_for 60 "B's tenant namespace gone from A" hasnt ka get namespace "$(tenant_of "$id_b")"
  wait_for 60 "A's tenant namespace gone from B" hasnt kb get namespace "$(tenant_of "$id_a")"
  ka delete foreigncluster cluster-b --wait --timeout=120s >/dev/null
}

check_lan() {
  local id_a id_b out
  id_a=$(cluster_id A)
  id_b=$(cluster_id B)
  say "LAN discovery between the two clusters' nodes"
  discovery A true
  discovery B true
  wait_for 120 "A discovered B on the LAN" fc_lan A "$id_b"
  wait_for 120 "B discovered A on the LAN" has kb get foreigncluster "$id_a"
  wait_for 180 "A joined B (autojoin)" fc_joined A "$id_b"
  wait_for 180 "B joined A (autojoin)" fc_joined B "$id_a"

  say "kubectl get foreignclusters"
  out=$(ka get foreignclusters)
  echo "$out"
  echo "$out" | head -1 | grep -q 'CLUSTER-ID' || fail "no CLUSTER-ID column"
  echo "$out" | grep "$id_b" | grep -q 'LAN' || fail "B not listed as LAN"
}

check_delete_while_unreachable() {
  local id_b
  id_b=$(cluster_id B)
  say "delete a ForeignCluster while the other cluster is unreachable"
  discovery A false # or A would find B again as soon as it returns
  partition
  ka delete foreigncluster "$id_b" --wait --timeout=300s >/dev/null || fail "ForeignCluster $id_b not deleted with B unreachable"
  # B joined A too, and its request here still stands while B is away: the incoming side may
  # stand in for it with an IncomingPeering ForeignCluster. The deleted one never comes back.
  local left
  left=$(ka get foreigncluster "$id_b" -o jsonpath='{.spec.discoveryType}' 2>/dev/null || true)
  case "$left" in
    "") ;;
    IncomingPeering) echo "ok: only the IncomingPeering stand-in for B's standing request is left" >&2 ;;
    *) fail "ForeignCluster $id_b still there ($left)" ;;
  esac
  not_named A advertisement "advertisement-$id_b" || fail "Advertisement of B still there"
  heal
}
