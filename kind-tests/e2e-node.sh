#!/usr/bin/env bash
# The node tier (`just e2e-node`): two real single-node clusters on this machine (node-up.sh),
# our image on a real kubelet, installed with `kubectl apply -k manifests/` as the README says,
# then the suite's checks (checks.sh, the same the kind suite runs) and what only real pods show:
#
#   1. the previous commit's manifests and image on both nodes (LIQO_PREVIOUS_REF, default
#      HEAD~1; skipped, and said so, where that commit has no image recipe), A peers with B
#      through B's NodePort auth service; then this commit's applied: the peering survives
#      (no re-join, nothing written to B), the reconciler's leader hands over to the new pod;
#   2. the ClusterConfig exists, the API server calls our webhook through its Service, and
#      `kubectl liqo status` is green (exit 0);
#   3. a rolling update of the reconciler keeps the peering (no re-join, no write to the peer);
#   4. leader failover: a second reconciler (a standby on other ports), the leader's process
#      frozen (SIGSTOP, no Lease release): the standby leads within the Lease's duration; woken,
#      the old leader exits; then the leading pod killed: another leads within that duration;
#   5. the shared checks: a forged PeeringRequest refused, unjoin cascade, LAN discovery between
#      the nodes (mDNS across their bridge) and autojoin both ways, `kubectl get
#      foreignclusters`, a ForeignCluster deleted while the other cluster is unreachable;
#   6. both nodes removed (node-down.sh), nothing left behind.
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
previous_ref=${LIQO_PREVIOUS_REF:-HEAD~1}
previous_tree=""
if git rev-parse --verify -q "$previous_ref^{commit}" >/dev/null && git cat-file -e "$previous_ref:image/build.sh" 2>/dev/null; then
  previous_tree="$(mktemp -d)/previous"
  git worktree add --detach -q "$previous_tree" "$previous_ref"
  PREVIOUS="liqo-discovery:previous-$(git rev-parse --short "$previous_ref")"
  if ! podman image exists "$PREVIOUS"; then
    # A target folder of its own: the two trees' crates share names and hashes, so in one folder
    # the previous build would leave its binary where this tree's next build finds it fresh.
    CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}/previous-commit" "$previous_tree/image/build.sh" "$PREVIOUS" >/dev/null
  fi
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

# --- 1. install (the previous commit first, when there is one), peer, upgrade in place ---
joined_since() { ka get foreigncluster cluster-b -o jsonpath='{.status.conditions[?(@.type=="Joined")].lastTransitionTime}'; }
# When A last wrote our PeeringRequest on B (its own status is B's to write).
request_written() { kb get peeringrequest "$(cluster_id A)" --show-managed-fields -o jsonpath='{.metadata.managedFields[?(@.manager=="liqo-peering")].time}'; }
secret_version() { kb -n liqo get secret "pr-kubeconfig-$(cluster_id A)" -o jsonpath='{.metadata.resourceVersion}'; }
holder() { "$(k_of "$1")" -n liqo get lease liqo-reconciler -o jsonpath='{.spec.holderIdentity}'; }
held_by() { [ "$(holder "$1")" = "$2" ]; }
held_by_other_than() { local h; h="$(holder "$1")"; [ -n "$h" ] && [ "$h" != "$2" ]; }
# The peering as it stands: joined since when, and the objects on B at which versions.
peering_state() { echo "joined-since=$(joined_since) request-written=$(request_written) secret=$(secret_version)"; }
kept() { # STATE WHAT: the peering is still joined and nothing about it changed
  fc_joined A cluster-b || fail "$2: cluster-b is no longer joined"
  [ "$(peering_state)" = "$1" ] || fail "$2: the peering changed: was $1, now $(peering_state)"
  echo "ok: $2: still joined, nothing re-joined or written to B ($1)" >&2
}

if [ -n "$previous_tree" ]; then
  for n in "$NODE_A" "$NODE_B"; do import_image "$n" "$PREVIOUS" "docker.io/library/$PREVIOUS"; done
  IMAGE=$PREVIOUS
  install A "$previous_tree/manifests"
  install B "$previous_tree/manifests"
else
  IMAGE=$CURRENT
  install A
  install B
fi
discovery A false
discovery B false
peer_a_with_b cluster-b
took "install and peer"

if [ -n "$previous_tree" ]; then
  say "upgrade in place: this commit's manifests and image over $previous_ref's"
  before="$(peering_state)"
  old_leader="$(holder A)"
  IMAGE=$CURRENT
  install A
  install B
  wait_for 60 "A's Lease handed over from $old_leader" held_by_other_than A "$old_leader"
  [ "$(ka -n liqo get pod "$(holder A)" -o jsonpath='{.spec.containers[0].image}')" = "$CURRENT" ] || fail "the new leader does not run $CURRENT"
  wait_for 120 "a health round of A's new leader" health_round A
  kept "$before" "upgrade in place"
  took "upgrade in place"
fi

# --- 2. what the install gives ---
say "the install: ClusterConfig, webhook through its Service, kubectl liqo status"
has ka get clusterconfig liqo-configuration || fail "no ClusterConfig"
cat <<EOF | ka apply -f - >/dev/null
apiVersion: discovery.liqo.io/v1alpha1
kind: ForeignCluster
metadata:
  name: webhook-probe
spec:
  authUrl: "https://192.0.2.1:1234"
EOF
[ "$(ka get foreigncluster webhook-probe -o jsonpath='{.spec.discoveryType}/{.spec.join}/{.metadata.labels.discovery\.liqo\.io/discovery-type}')" = "Manual/false/Manual" ] \
  || fail "the mutating webhook did not default the ForeignCluster: $(ka get foreigncluster webhook-probe -o jsonpath='{.spec}')"
ka delete foreigncluster webhook-probe --wait --timeout=60s >/dev/null
echo "ok: the API server called the webhook through Service liqo-webhook (defaults applied)" >&2
"$KUBECTL_LIQO" --kubeconfig "$KA" status || fail "kubectl liqo status on A is not green"
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
wait_for 45 "another reconciler leading after the leader's pod was killed" held_by_other_than A "$standby"
echo "ok: $(holder A) led $((SECONDS - killed)) s after the leading pod $standby was killed" >&2
[ $((SECONDS - killed)) -le 30 ] || fail "the takeover took longer than the Lease's duration and a renewal"
ka -n liqo delete deployment liqo-reconciler-standby --wait --timeout=60s >/dev/null
wait_for 120 "A's reconciler leading again" leading A
wait_for 120 "cluster-b joined after the failover" fc_joined A cluster-b
took "leader failover"

# --- 5. the shared checks ---
check_peering
check_lan
check_delete_while_unreachable
took "shared checks"

trap - EXIT
if [ "${KEEP:-0}" != 1 ]; then
  kind-tests/node-down.sh "$NODE_A" || fail "node-down $NODE_A left something behind"
  kind-tests/node-down.sh "$NODE_B" || fail "node-down $NODE_B left something behind"
fi
[ -n "$previous_tree" ] && git worktree remove --force "$previous_tree" >/dev/null 2>&1
took "both nodes down"
say "PASSED: node tier in $((SECONDS - began)) s"
