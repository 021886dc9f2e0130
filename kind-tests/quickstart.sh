#!/usr/bin/env bash
# docs/quickstart.md, run as written (part of the node tier, `just quickstart` alone): every
# ```sh block of the page in order, in one shell, from the repository's root, as a reader pastes
# them into one terminal (of the blocks marked ```sh docker / ```sh podman, those of
# LIQO_ENGINE, default podman: there is no Docker engine here). Only `kind` is not the real
# one: kind-tests/kind-stand-in/kind does what the page uses kind for on the node tier's real
# single-node clusters. cargo, image/build.sh, podman, kubectl and `kubectl liqo` are the real
# ones. The page must end with the two clusters peered both ways (checked here, on both
# sides); then its clean-up block runs, and nothing of the clusters may be left.
#
# A fresh user's kubeconfig (KUBECONFIG in a temporary folder) and plugin folder
# (CARGO_INSTALL_ROOT). CARGO_TARGET_DIR, when set, is where cargo builds (CI builds the plugin
# and the image there beforehand). Skips loudly (exit 0) where the node tier cannot run.
# KEEP=1 keeps the clusters when a step fails.
set -euo pipefail
cd "$(dirname "$0")/.."
. kind-tests/node-lib.sh

page=docs/quickstart.md
engine="${LIQO_ENGINE:-podman}"
missing="$(node_missing)"
if [ -n "$missing" ]; then
  echo "SKIPPED: the quick start (docs/quickstart.md) needs $missing" >&2
  exit 0
fi
began=$SECONDS
work="$(mktemp -d /tmp/liqo-quickstart.XXXXXX)"

# The page's blocks: main.sh (every block before "## Clean up"), clean.sh (the blocks under
# it), each block preceded by a line naming where it is on the page.
extract() {
  awk -v engine="$engine" -v work="$work" -v page="$page" '
    /^## / { clean = ($0 == "## Clean up") }
    /^```sh( |$)/ {
      on = ($2 == "" || $2 == engine)
      if (on) { out = work "/" (clean ? "clean.sh" : "main.sh"); printf "echo \"--- %s:%d\" >&2\n", page, NR >> out; blocks++ }
      next
    }
    /^```/ { on = 0; next }
    on { print >> out }
    END { print blocks }' "$page"
}
blocks="$(extract)"
[ -s "$work/main.sh" ] && [ -s "$work/clean.sh" ] || fail "$page: no \`\`\`sh blocks, or no \"## Clean up\" section with one"
say "docs/quickstart.md: $blocks blocks ($engine's), kind replaced by kind-tests/kind-stand-in/kind"

export KUBECONFIG="$work/kubeconfig"
export CARGO_INSTALL_ROOT="$work/cargo"
export LIQO_ENGINE="$engine"
export PATH="$CARGO_INSTALL_ROOT/bin:$PWD/kind-tests/kind-stand-in:$PATH"
[ "$(command -v kind)" = "$PWD/kind-tests/kind-stand-in/kind" ] || fail "kind is not the stand-in: $(command -v kind)"

down() {
  for c in alpha beta; do kind-tests/node-down.sh "$c" >/dev/null 2>&1 || true; done
}
on_exit() {
  local rc=$?
  rm -f liqo.tar
  if [ $rc != 0 ]; then
    echo "FAILED: the quick start, as written, after $((SECONDS - began)) s" >&2
    for c in alpha beta; do
      echo "--- pods of kind-$c:" >&2
      kubectl --context "kind-$c" get pods -A -o wide >&2 2>&1 || true
    done
    [ "${KEEP:-0}" = 1 ] || down
  fi
  rm -rf "$work"
}
trap on_exit EXIT

bash -euo pipefail "$work/main.sh" || fail "a command of $page failed (its block is named above)"
took_main=$((SECONDS - began))

# The page's promise: alpha and beta peered, both ways, seen from both sides.
id_of() { kubectl --context "kind-$1" get configmap -n liqo cluster-id -o jsonpath='{.data.cluster-id}'; }
joined() { # CLUSTER PEER_ID DIRECTION: the ForeignCluster for PEER_ID on CLUSTER says so
  [ "$(kubectl --context "kind-$1" get foreignclusters -l "discovery.liqo.io/cluster-id=$2" \
    -o jsonpath="{.items[0].status.$3.joined}")" = true ]
}
alpha="$(id_of alpha)"
beta="$(id_of beta)"
wait_for 60 "alpha joined to beta" joined alpha "$beta" outgoing
wait_for 60 "beta accepting alpha" joined beta "$alpha" incoming
[ "$(kubectl --context kind-alpha get foreignclusters -l discovery.liqo.io/peer-name=beta -o name | wc -l)" = 1 ] \
  || fail "no ForeignCluster on alpha answers to the name beta the page gave"
kubectl liqo status --context kind-beta >/dev/null || fail "kubectl liqo status on beta: a peer not joined"
echo "ok: the quick start ends with alpha ($alpha) and beta ($beta) peered both ways" >&2

bash -euo pipefail "$work/clean.sh" || fail "a command of $page's clean-up failed (its block is named above)"
for c in alpha beta; do
  [ ! -e "$(node_dir "$c")" ] && [ ! -e "/run/netns/liqo-$c" ] || fail "kind delete cluster --name $c left the node behind"
  ! kubectl config get-contexts "kind-$c" >/dev/null 2>&1 || fail "context kind-$c left in the kubeconfig"
done
say "PASSED: docs/quickstart.md as written in $((SECONDS - began)) s (to peered: $took_main s)"
