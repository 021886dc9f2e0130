#!/usr/bin/env bash
# The node tier (`just e2e-node`): two real single-node clusters on this machine (node-up.sh),
# our image on real kubelets, then what only real pods show:
#
#   1. this commit installed as the README says, its kustomize lines (run as the page has them) and nothing else
#      (LAN discovery on, no address typed): the clusters find their own addresses and peer
#      both ways within 3 health periods; the ClusterConfig says where each address came from;
#      ConfigMap liqo-reconciler-env overrides one, read live, and is removed again;
#   2. the API server calls our webhook through its Service, `kubectl liqo status` is green;
#   3. a rolling update of the reconciler keeps the peering (no re-join, no write to the peer);
#   4. leader failover: a second reconciler (a standby on other ports), the leader's process
#      frozen (SIGSTOP, no Lease release): the standby leads within the Lease's duration; woken,
#      the old leader exits; then the leading pod killed: another leads within that duration;
#   5. the shared checks (checks.sh, the same the kind suite runs): a forged PeeringRequest
#      refused, unjoin cascade, LAN discovery and autojoin both ways, `kubectl get
#      foreignclusters`, a ForeignCluster deleted while the other cluster is unreachable;
#   6. `kubectl liqo uninstall --unpeer` on both: no object of ours is left (every resource kind
#      listed, the CRDs included);
#   7. the previous release (LIQO_PREVIOUS_REF, default a65511d: the last commit of 0.2, whose
#      identities last a year; skipped, and said so, where that commit has no image recipe)
#      installed as its README said, LAN discovery off, A peered with B by hand; then `kubectl
#      liqo install` of this commit over it on A, then on B: the peering is kept (the same
#      PeeringRequest, joined throughout), and both identities of a year (A's on B, and the
#      kubeconfig A keeps on B) are renewed to the shipped 7 days within 3 health periods of B's
#      install. (With LIQO_PREVIOUS_REF=f32e68a, the last commit of the cluster-scoped protocol
#      0.1: A names B as on the older protocol (PeerOnOlderProtocol) until B's install, then the
#      peering forms again by itself in the tenant namespaces, no per-peer ClusterRole left.)
#      Then B runs the `kubectl liqo peer` line A's install printed: joined both ways; both
#      uninstalled (--unpeer), nothing left;
#   8. both nodes removed (node-down.sh), nothing left behind;
#   9. docs/quickstart.md run as written (kind-tests/quickstart.sh: its blocks in order, kind
#      replaced by a stand-in making nodes like these) on two new nodes made right after: a
#      fresh `kubectl liqo install` on both, `peer --wait`, `status`, peered both ways, then
#      its clean-up (`uninstall --unpeer`, `kind delete cluster`), nothing left.
#
# Skips loudly (exit 0) where the node's binaries or packages are missing. KEEP=1 keeps the
# nodes. Prints how long each part took.
set -euo pipefail
cd "$(dirname "$0")/.."
. kind-tests/node-lib.sh
. kind-tests/checks.sh

missing="$(node_missing)"
if [ -n "$missing" ]; then
  echo "SKIPPED: the node tier needs $missing" >&2
  exit 0
fi
began=$SECONDS
lap=$SECONDS
took() { echo "TOOK: $1: $((SECONDS - lap)) s" >&2; lap=$SECONDS; }

NODE_A=${LIQO_NODE_A:-e2e-a}
NODE_B=${LIQO_NODE_B:-e2e-b}
VERSION="$(image/version.sh)"
CURRENT="liqo-discovery:$VERSION"
KUBECTL_LIQO=${KUBECTL_LIQO:-${CARGO_TARGET_DIR:-target}/debug/kubectl-liqo}

cleanup() {
  if [ "${KEEP:-0}" != 1 ]; then
    kind-tests/node-down.sh "$NODE_A" || echo "FAILED: node-down $NODE_A left something behind" >&2
    kind-tests/node-down.sh "$NODE_B" || echo "FAILED: node-down $NODE_B left something behind" >&2
  fi
  [ -n "${previous_tree:-}" ] && git worktree remove --force "$previous_tree" >/dev/null 2>&1
  return 0
}
trap cleanup EXIT

say "images"
podman image exists "$CURRENT" || image/build.sh "$CURRENT" >/dev/null
[ -x "$KUBECTL_LIQO" ] || cargo build -q -p liqo-cli
# The previous release: the last commit of 0.2 (tenant namespaces, identities of a year, no
# binding of IDs), the upgrade protocol §10 asks to prove. LIQO_PREVIOUS_REF=f32e68a (the last
# commit of the cluster-scoped protocol, 0.1) proves the upgrade of protocol §9 instead.
previous_ref=${LIQO_PREVIOUS_REF:-a65511d}
# The release this commit is (CHANGELOG.md, Cargo.toml); the previous ones' commits never
# raised the version they were built with, so they are named by their releases here.
THIS_VERSION="$(image/version.sh)"
previous_tree=""
PREVIOUS="$(kind-tests/previous-image.sh "$previous_ref" | tail -n 1)"
if [ -n "$PREVIOUS" ]; then
  previous_tree="$(mktemp -d)/previous"
  git worktree add --detach -q "$previous_tree" "$previous_ref"
else
  echo "SKIPPED: upgrade in place: $previous_ref has no image recipe (image/build.sh); installing this commit only" >&2
fi
took "images"

KA="$(kind-tests/node-up.sh "$NODE_A" "$CURRENT" | tail -n 1 | sed 's/^KUBECONFIG=//')"
KB="$(kind-tests/node-up.sh "$NODE_B" "$CURRENT" | tail -n 1 | sed 's/^KUBECONFIG=//')"
[ -f "$KA" ] && [ -f "$KB" ] || fail "the nodes did not come up"
ka() { kubectl --kubeconfig "$KA" "$@"; }
kb() { kubectl --kubeconfig "$KB" "$@"; }
node_of() { case "$1" in A) echo "$NODE_A" ;; B) echo "$NODE_B" ;; esac; }
addr() { echo "10.213.0.$((10 + $(cat "$(node_dir "$(node_of "$1")")/index")))"; }
partition() { ip link set "lq$(cat "$(node_dir "$NODE_B")/index")h" down; }
heal() { ip link set "lq$(cat "$(node_dir "$NODE_B")/index")h" up; }
took "two nodes up"

HEALTH=30 # the reconciler's --health-period-seconds, as the manifests ship it
kubeconfig_of() { case "$1" in A) echo "$KA" ;; B) echo "$KB" ;; esac; }
liqo() {
  local c=$1
  shift
  "$KUBECTL_LIQO" --kubeconfig "$(kubeconfig_of "$c")" "$@"
}
# FC_B: A's ForeignCluster for B (LAN discovery names it after B's cluster ID; by hand: cluster-b).
FC_B=""
joined_since() { ka get foreigncluster "$FC_B" -o jsonpath='{.status.conditions[?(@.type=="Joined")].lastTransitionTime}'; }
# When A last wrote our PeeringRequest on B (its own status is B's to write).
request_written() { kb get peeringrequest -A --field-selector "metadata.name=$(cluster_id A)" --show-managed-fields -o jsonpath='{.items[0].metadata.managedFields[?(@.manager=="liqo-peering")].time}'; }
secret_version() { kb -n "$(tenant_of "$(cluster_id A)")" get secret "pr-kubeconfig-$(cluster_id A)" -o jsonpath='{.metadata.resourceVersion}'; }
holder() { "$(k_of "$1")" -n liqo get lease liqo-reconciler -o jsonpath='{.spec.holderIdentity}'; }
held_by() { [ "$(holder "$1")" = "$2" ]; }
held_by_other_than() {
  local h
  h="$(holder "$1")"
  [ -n "$h" ] && [ "$h" != "$2" ]
}
# The peering as it stands: joined since when, and the objects on B at which versions.
peering_state() { echo "joined-since=$(joined_since) request-written=$(request_written) secret=$(secret_version)"; }
kept() { # STATE WHAT: the peering is still joined and nothing about it changed
  fc_joined A "$FC_B" || fail "$2: $FC_B is no longer joined"
  [ "$(peering_state)" = "$1" ] || fail "$2: the peering changed: was $1, now $(peering_state)"
  echo "ok: $2: still joined, nothing re-joined or written to B ($1)" >&2
}
# Both clusters joined to each other (each ForeignCluster named after the other's cluster ID).
peered_both_ways() { fc_joined A "$(cluster_id B)" && fc_joined B "$(cluster_id A)"; }
told() { "$(k_of "$1")" get clusterconfig liqo-configuration -o jsonpath="{.status.$2}"; }
addresses_ok() { [ "$("$(k_of "$1")" get clusterconfig liqo-configuration -o jsonpath='{.status.conditions[?(@.type=="AddressesReachable")].status}')" = True ]; }
auth_from() { [ "$(told "$1" authUrlFrom)" = "$2" ]; }
auth_from_node_port() {
  case "$(told "$1" authUrlFrom)" in
    "Service liqo-auth (NodePort) on node "*) return 0 ;;
    *) return 1 ;;
  esac
}

# The README's kustomize lines ("For GitOps, or without the plugin"), one command a line, as
# the page has them (api/tests/manifests.rs reads the same lines).
readme_kustomize_lines() {
  awk '/^For GitOps, or without the plugin, the same manifests apply with kustomize:/ {on = 1; next}
       on && /^    / {sub(/^    /, ""); print; seen = 1; next}
       on && seen {exit}' README.md
}

# install_as_readme A|B: the README's kustomize lines run as written (the namespace, the CRDs,
# the waits for the certificates and the webhook, the default ClusterConfig), nothing else: no
# address given, LAN discovery as shipped (on).
install_as_readme() {
  local k lines
  k=$(k_of "$1")
  lines=$(readme_kustomize_lines)
  [ "$(printf '%s\n' "$lines" | grep -c '^kubectl ')" -ge 5 ] || fail "the README's kustomize lines not found: $lines"
  say "install on $1 as the README says (its kustomize lines, nothing else)"
  KUBECONFIG="$(kubeconfig_of "$1")" sh -ec "$lines" >/dev/null || stuck "$k" "the README's kustomize lines on $1"
  "$k" -n liqo rollout status deployment/liqo-reconciler --timeout=180s >/dev/null || stuck "$k" "reconciler rollout on $1"
  wait_for 60 "the reconciler of $1 ready and leading" leading "$1"
}

# peer_by_lan HOW: peered both ways within 3 health periods of both reconcilers leading.
peer_by_lan() {
  local began=$SECONDS
  wait_for $((3 * HEALTH)) "$1: A and B peered both ways by LAN discovery" peered_both_ways
  echo "ok: $1: peered both ways $((SECONDS - began)) s after both reconcilers led (3 health periods: $((3 * HEALTH)) s)" >&2
  FC_B="$(cluster_id B)"
}

# leftovers A|B: every object of ours in the cluster (by name, or labelled with a peer's ID),
# of every resource kind that can be listed; one per line.
leftovers() {
  local k kinds
  k=$(k_of "$1")
  kinds="$("$k" api-resources --verbs=list -o name | grep -v '^events' | paste -sd, -)"
  [ -n "$kinds" ] || fail "no resource kinds listed on $1"
  # The holder key (kube-system/liqo-holder-key) is kept on purpose, as the ID's record is.
  { "$k" get "$kinds" -A -o name 2>/dev/null || true; } | grep -i 'liqo' | grep -vx 'secret/liqo-holder-key' || true
  "$k" get "$kinds" -A -o name -l discovery.liqo.io/cluster-id 2>/dev/null || true
}

# uninstall_both: `kubectl liqo uninstall --unpeer` on both clusters; then nothing of ours left.
uninstall_both() {
  local c left
  for c in A B; do
    say "kubectl liqo uninstall --unpeer on $c"
    liqo "$c" uninstall --unpeer --timeout 5m >&2 || fail "uninstall on $c"
  done
  for c in A B; do
    left="$(leftovers "$c")"
    [ -z "$left" ] || fail "objects of ours left on $c after uninstall: $(echo "$left" | tr '\n' ' ')"
    echo "ok: nothing of ours left on $c (every resource kind listed)" >&2
  done
}

# --- 1. this commit as the README says, nothing else: LAN peering both ways ---
install_as_readme A
install_as_readme B
peer_by_lan "kubectl apply -k"
for c in A B; do
  wait_for 60 "$c's auth URL found from its NodePort" auth_from_node_port "$c"
  [ "$(told "$c" authUrl)" = "$(auth_url "$c")" ] || fail "$c tells the auth URL $(told "$c" authUrl), not $(auth_url "$c")"
  [ "$(told "$c" apiUrl)" = "https://$(addr "$c"):6443" ] || fail "$c tells the API server $(told "$c" apiUrl) ($(told "$c" apiUrlFrom))"
  addresses_ok "$c" || fail "$c: AddressesReachable is not True"
  echo "ok: $c tells $(told "$c" apiUrl) ($(told "$c" apiUrlFrom)) and $(told "$c" authUrl) ($(told "$c" authUrlFrom))" >&2
done
say "ConfigMap liqo-reconciler-env overrides an address, read live"
port=$(ka -n liqo get service liqo-auth -o jsonpath='{.spec.ports[0].nodePort}')
ka -n liqo create configmap liqo-reconciler-env --from-literal=LIQO_AUTH_URL="https://$(addr A):$port/" >/dev/null
wait_for 60 "A's auth URL from the ConfigMap, without a restart" auth_from A "ConfigMap liqo-reconciler-env"
ka -n liqo delete configmap liqo-reconciler-env >/dev/null
wait_for 60 "A's auth URL from its NodePort again" auth_from_node_port A
# docs/troubleshooting.md's lines that read pods' logs, as written (the API-server test of its
# other lines has no kubelet): each prints what the pod wrote.
for line in "kubectl -n liqo logs deploy/liqo-reconciler" "kubectl -n liqo logs job/liqo-certs"; do
  grep -qF "\`$line\`" docs/troubleshooting.md || fail "docs/troubleshooting.md no longer says $line"
  out="$(KUBECONFIG="$KA" sh -ec "$line" 2>&1)" || fail "docs/troubleshooting.md: $line: $out"
  [ -n "$out" ] || fail "docs/troubleshooting.md: $line printed nothing"
  echo "ok: docs/troubleshooting.md: $line ($(echo "$out" | wc -l) lines)" >&2
done
took "install as the README says, LAN peering, addresses"

# --- 2. what the install gives ---
say "the install: ClusterConfig, webhook through its Service, kubectl liqo status"
has ka get clusterconfig liqo-configuration || fail "no ClusterConfig"
probe='{"apiVersion":"discovery.liqo.io/v1alpha1","kind":"ForeignCluster","metadata":{"name":"webhook-probe"},"spec":{"authUrl":"https://192.0.2.1:1234"}}'
echo "$probe" | ka apply -f - >/dev/null
[ "$(ka get foreigncluster webhook-probe -o jsonpath='{.spec.discoveryType}/{.spec.join}/{.metadata.labels.discovery\.liqo\.io/discovery-type}')" = "Manual/false/Manual" ] \
  || fail "the mutating webhook did not default the ForeignCluster: $(ka get foreigncluster webhook-probe -o jsonpath='{.spec}')"
ka delete foreigncluster webhook-probe --wait --timeout=60s >/dev/null
echo "ok: the API server called the webhook through Service liqo-webhook (defaults applied)" >&2
liqo A status || fail "kubectl liqo status on A is not green"
took "the install's checks"

# --- 3. a rolling update keeps the peering ---
say "rolling update of A's reconciler"
before="$(peering_state)"
old_leader="$(holder A)"
ka -n liqo rollout restart deployment/liqo-reconciler >/dev/null
ka -n liqo rollout status deployment/liqo-reconciler --timeout=180s >/dev/null || fail "the rollout did not finish"
wait_for 60 "A's Lease held by the new pod" held_by_other_than A "$old_leader"
wait_for 120 "a health round of A's new leader" health_round A
kept "$before" "rolling update"
took "rolling update"

# --- 4. leader failover ---
say "leader failover: a standby reconciler, the leader frozen"
ka -n liqo get deployment liqo-reconciler -o json | python3 kind-tests/standby.py | ka apply -f - >/dev/null
standby_ready() { [ "$(ka -n liqo get deployment liqo-reconciler-standby -o jsonpath='{.status.readyReplicas}')" = 1 ]; }
wait_for 120 "the standby reconciler ready" standby_ready
leader="$(holder A)"
standby="$(ka -n liqo get pods -l liqo.io/role=standby -o jsonpath='{.items[0].metadata.name}')"
[ -n "$leader" ] && [ "$leader" != "$standby" ] || fail "the standby ($standby) leads before the failover: $leader"
pid=""
for p in /proc/[0-9]*; do
  if grep -qxz "POD_NAME=$leader" "$p/environ" 2>/dev/null; then pid="${p#/proc/}"; break; fi
done
[ -n "$pid" ] || fail "no process of the leader $leader"
# Frozen, not killed: a killed container restarts at once under the same name and renews its
# own Lease; a frozen leader stops renewing without letting go, as a hung or cut-off node does.
restarts() { ka -n liqo get pod "$leader" -o jsonpath='{.status.containerStatuses[0].restartCount}'; }
restarted_since() { [ "$(restarts)" != "$1" ]; }
before_restarts="$(restarts)"
kill -STOP "$pid"
frozen=$SECONDS
wait_for 45 "the standby $standby leading" held_by A "$standby"
echo "ok: the standby led $((SECONDS - frozen)) s after the leader froze (Lease duration 15 s)" >&2
[ $((SECONDS - frozen)) -le 30 ] || fail "the standby took longer than the Lease's duration and a renewal"
# Woken, the old leader finds its Lease taken and exits (its container restarts as a standby).
kill -CONT "$pid"
wait_for 60 "the old leader exited on waking (container restarted)" restarted_since "$before_restarts"
[ "$(holder A)" = "$standby" ] || fail "the woken old leader took the Lease back: $(holder A)"
# The leading pod killed (deleted at once): another reconciler leads within the Lease's duration.
ka -n liqo delete pod "$standby" --grace-period=0 --force >/dev/null 2>&1
killed=$SECONDS
wait_for 45 "another reconciler leading after the leading pod was killed" held_by_other_than A "$standby"
echo "ok: $(holder A) led $((SECONDS - killed)) s after the leading pod $standby was killed" >&2
[ $((SECONDS - killed)) -le 30 ] || fail "the takeover took longer than the Lease's duration and a renewal"
ka -n liqo delete deployment liqo-reconciler-standby --wait --timeout=60s >/dev/null
wait_for 120 "A's reconciler leading again" leading A
wait_for 120 "$FC_B joined after the failover" fc_joined A "$FC_B"
took "leader failover"

# --- 5. the shared checks (they peer by hand first: the LAN's ForeignClusters go) ---
discovery A false
discovery B false
ka delete foreignclusters --all --wait --timeout=180s >/dev/null
kb delete foreignclusters --all --wait --timeout=180s >/dev/null
check_peering
check_lan
check_delete_while_unreachable
took "shared checks"

# --- 6. uninstall ---
uninstall_both
took "uninstall --unpeer, nothing left"

# How long the token in a kubeconfig (read with CMD... -o jsonpath=...kubeconfig, base64)
# lasts, in days: from the JWT's own iat and exp.
token_days() {
  "$@" | base64 -d | python3 -c '
import base64, json, re, sys
token = re.search(r"token: *\"?([A-Za-z0-9_.-]+)", sys.stdin.read()).group(1)
claims = token.split(".")[1]
claims = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))
print(int((claims["exp"] - claims["iat"]) / 86400))'
}
# The days of A's identity on B (kept on A), and of the kubeconfig A keeps on B.
identity_days() { token_days ka -n liqo get secret "$FC_B-identity" -o jsonpath='{.data.kubeconfig}'; }
handed_days() { token_days kb -n "$(tenant_of "$(cluster_id A)")" get secret "pr-kubeconfig-$(cluster_id A)" -o jsonpath='{.data.kubeconfig}'; }
renewed_to_a_week() { [ "$(identity_days)" -le 7 ] && [ "$(handed_days)" -le 7 ]; }
# The cluster ID recorded on kube-system (protocol §2) is the one in the Liqo namespace.
recorded_id() { "$(k_of "$1")" get namespace kube-system -o jsonpath='{.metadata.annotations.discovery\.liqo\.io/cluster-id}'; }
both_recorded() { [ "$(recorded_id A)" = "$(cluster_id A)" ] && [ "$(recorded_id B)" = "$(cluster_id B)" ]; }
request_uid() { kb -n "$(tenant_of "$(cluster_id A)")" get peeringrequest "$(cluster_id A)" -o jsonpath='{.metadata.uid}'; }

# 0.2 -> this commit (protocol §10): A upgraded first, then B; the peering is kept throughout (the
# same PeeringRequest), and the identities of a year 0.2 issued are renewed to the shipped
# lifetime (7 days) both ways within 3 health periods of B's install.
upgrade_from_tenant_namespaces() {
  say "upgrade in place: kubectl liqo install of $THIS_VERSION over 0.2.0 ($previous_ref), A first"
  local uid days out upgraded id_a id_b
  uid="$(request_uid)"
  id_a="$(cluster_id A)"
  id_b="$(cluster_id B)"
  days="$(identity_days) / $(handed_days)"
  [ "$(identity_days)" -ge 300 ] || fail "0.2 issued A's identity for $(identity_days) days, not a year"
  out_a="$(liqo A install --timeout 5m)" || fail "kubectl liqo install on A: $out_a"
  echo "$out_a" >&2
  [ "$(ka -n liqo get pod "$(holder A)" -o jsonpath='{.spec.containers[0].image}')" = "$CURRENT" ] || fail "A's leader does not run $CURRENT"
  wait_for $((2 * HEALTH)) "A still joined to B (on 0.2)" fc_joined A "$FC_B"
  out="$(liqo B install --timeout 5m)" || fail "kubectl liqo install on B: $out"
  upgraded=$SECONDS
  wait_for $((3 * HEALTH)) "both identities renewed to the shipped lifetime (were $days days)" renewed_to_a_week
  echo "ok: renewed to $(identity_days) / $(handed_days) days (from $days) $((SECONDS - upgraded)) s after B's install ended" >&2
  [ "$(request_uid)" = "$uid" ] || fail "A's PeeringRequest on B was made anew: a re-join"
  fc_joined A "$FC_B" || fail "A is not joined to B after the upgrade"
  # The sweep labels what it finds in use, every third of a health period once it leads.
  in_use() { [ "$(kb -n "$(tenant_of "$(cluster_id A)")" get serviceaccount "remote-$(cluster_id A)" -o jsonpath='{.metadata.labels.discovery\.liqo\.io/identity}')" = in-use ]; }
  wait_for "$HEALTH" "B counting A's identity in use" in_use
  # The cluster IDs 0.2 chose are kept, and recorded outside the Liqo namespace (protocol §2).
  [ "$(cluster_id A)" = "$id_a" ] && [ "$(cluster_id B)" = "$id_b" ] || fail "a cluster ID changed in the upgrade"
  wait_for "$HEALTH" "A's and B's cluster IDs recorded on kube-system" both_recorded
  took "upgrade in place from 0.2.0 to $THIS_VERSION, peering kept, identities renewed, IDs recorded"
}

# 0.1 -> this commit (protocol §9): A upgraded first names B as on the older protocol; after B's
# upgrade the peering forms again by itself in the tenant namespaces.
upgrade_from_cluster_scoped() {
  say "upgrade in place: kubectl liqo install of $THIS_VERSION over 0.1.0 ($previous_ref), A first"
  local old_leader upgraded
  old_leader="$(holder A)"
  out_a="$(liqo A install --timeout 5m)" || fail "kubectl liqo install on A: $out_a"
  echo "$out_a" >&2
  echo "$out_a" | grep -q "upgrading CRD peeringrequests.discovery.liqo.io from the cluster-scoped protocol" \
    || fail "A's install did not say it replaced the cluster-scoped CRDs"
  held_by_other_than A "$old_leader" || fail "A's Lease was not handed over to the new reconciler"
  [ "$(ka -n liqo get pod "$(holder A)" -o jsonpath='{.spec.containers[0].image}')" = "$CURRENT" ] || fail "the new leader does not run $CURRENT"
  older() { [ "$(ka get foreigncluster cluster-b -o jsonpath='{.status.conditions[?(@.type=="Joined")].reason}')" = PeerOnOlderProtocol ]; }
  wait_for $((2 * HEALTH)) "A naming B as on the older protocol" older
  echo "ok: A says: $(ka get foreigncluster cluster-b -o jsonpath='{.status.conditions[?(@.type=="Joined")].message}')" >&2
  fc_not_joined A cluster-b || fail "A says joined to B while B runs the older protocol"
  liqo B install --timeout 5m >&2 || fail "kubectl liqo install on B"
  upgraded=$SECONDS
  # Joined as the new protocol has it: our request in A's tenant namespace on B, B's
  # Advertisement in B's tenant namespace on A, the Joined condition True.
  repeered() {
    fc_joined A cluster-b \
      && [ "$(ka get foreigncluster cluster-b -o jsonpath='{.status.conditions[?(@.type=="Joined")].status}')" = True ] \
      && request_in_tenant B "$(cluster_id A)" \
      && advertisement_in_tenant A "$(cluster_id B)"
  }
  wait_for $((3 * HEALTH)) "A joined to B again by itself after B's upgrade, in the tenant namespaces" repeered
  echo "ok: re-peered $((SECONDS - upgraded)) s after B's install ended (3 health periods: $((3 * HEALTH)) s)" >&2
  for c in A B; do
    [ -z "$("$(k_of "$c")" get clusterrole,clusterrolebinding -l discovery.liqo.io/cluster-id -o name)" ] \
      || fail "per-peer ClusterRoles of 0.1 left on $c"
  done
  took "upgrade in place, re-peered"
}

# --- 7. the previous commit, then kubectl liqo install of this one over it ---
if [ -n "$previous_tree" ]; then
  for n in "$NODE_A" "$NODE_B"; do import_image "$n" "$PREVIOUS" "docker.io/library/$PREVIOUS"; done
  IMAGE=$PREVIOUS
  install A "$previous_tree/manifests"
  install B "$previous_tree/manifests"
  FC_B=cluster-b
  peer_a_with_b cluster-b
  took "the previous commit installed and peered"

  if git cat-file -e "$previous_ref:reconciler/src/tenant.rs" 2>/dev/null; then
    upgrade_from_tenant_namespaces
  else
    upgrade_from_cluster_scoped
  fi

  say "LAN discovery off: B peers with A by the line A's install printed"
  line="$(echo "$out_a" | grep -m1 '^  kubectl liqo peer ')" || fail "A's install printed no peer line"
  read -r _ _ _ url rest <<<"$line"
  # shellcheck disable=SC2086 # the printed flags, one word each
  liqo B peer "$url" $rest --wait=180s >&2 || fail "B's kubectl liqo peer $url $rest"
  fc_joined A cluster-b || fail "A is no longer joined to B"
  fc_joined B "$(cluster_id A)" || fail "B is not joined to A"
  echo "ok: joined both ways (A by hand before the upgrade, B by the line A's install printed)" >&2
  took "peered by the printed line"
  reinstalled_id="$(cluster_id A)"
  uninstall_both
  took "uninstall --unpeer, nothing left"
  # Uninstalled (the Liqo namespace deleted) and installed again: the same cluster ID, from
  # the record on kube-system, which the uninstall keeps (protocol §2).
  say "a reinstall of A keeps its cluster ID"
  liqo A install --timeout 5m >&2 || fail "kubectl liqo install on A again"
  [ "$(cluster_id A)" = "$reinstalled_id" ] || fail "A came back as $(cluster_id A), not $reinstalled_id"
  took "reinstalled, the same cluster ID"
else
  say "SKIPPED: the previous commit and kubectl liqo install over it (no image recipe at $previous_ref)"
fi

# --- 8. both nodes removed, nothing left behind ---
trap - EXIT
if [ "${KEEP:-0}" != 1 ]; then
  kind-tests/node-down.sh "$NODE_A" || fail "node-down $NODE_A left something behind"
  kind-tests/node-down.sh "$NODE_B" || fail "node-down $NODE_B left something behind"
fi
[ -n "$previous_tree" ] && git worktree remove --force "$previous_tree" >/dev/null 2>&1
took "both nodes down"

# --- 9. docs/quickstart.md as written, on two new nodes made at once in the places of the
# two just removed (the same indexes, veth names and addresses: `node-up` right after
# `node-down`): kubectl liqo install on fresh clusters, peer, status, uninstall ---
if [ "${KEEP:-0}" != 1 ]; then
  kind-tests/quickstart.sh || fail "docs/quickstart.md as written"
  took "docs/quickstart.md as written"
fi
say "PASSED: node tier in $((SECONDS - began)) s"
