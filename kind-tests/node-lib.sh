# What node-up.sh, node-down.sh and e2e-node.sh share (sourced, not run).
# State of node NAME: $LIQO_NODES_DIR/NAME (default /var/lib/liqo-nodes): its index, certificates,
# kubeconfigs, logs, pids, etcd, kubelet and containerd directories.

LIQO_KUBE_BIN="${LIQO_KUBE_BIN:-${KUBEBUILDER_ASSETS:-/opt/kubebuilder-assets}}"
LIQO_NODES_DIR="${LIQO_NODES_DIR:-/var/lib/liqo-nodes}"
LIQO_CNI_BIN="${LIQO_CNI_BIN:-/usr/lib/cni}"
# Host-wide settings kubelet rewrites at start; saved by the first node, put back by the last.
NODE_SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes)

. kind-tests/lib.sh

node_dir() { echo "$LIQO_NODES_DIR/$1"; }

# The binaries and packages a node needs that this machine lacks (empty: none).
node_missing() {
  local m=() b
  for b in kube-apiserver etcd kubelet kube-controller-manager kube-scheduler kube-proxy; do
    [ -x "$LIQO_KUBE_BIN/$b" ] || m+=("$LIQO_KUBE_BIN/$b")
  done
  for b in containerd containerd-shim-runc-v2 ctr runc podman openssl ip nsenter iptables kubectl busybox; do
    command -v "$b" >/dev/null 2>&1 || m+=("$b")
  done
  for b in bridge host-local portmap; do
    [ -x "$LIQO_CNI_BIN/$b" ] || m+=("$LIQO_CNI_BIN/$b")
  done
  [ "$(id -u)" = 0 ] || m+=("root")
  echo "${m[*]}"
}

# nsrun NETNS COMMAND...: COMMAND in the network namespace only (the mount namespace stays this
# machine's, so that kubelet's volume mounts are seen by containerd and its containers).
nsrun() {
  local ns=$1
  shift
  nsenter --net="/run/netns/$ns" -- "$@"
}

# start NAME PROCESS COMMAND...: runs COMMAND in node NAME's namespace, in the background, its
# output in logs/PROCESS.log, its pid in pids/PROCESS.
start() {
  local name=$1 proc=$2 dir
  shift 2
  dir="$(node_dir "$name")"
  mkdir -p "$dir/pids" "$dir/logs"
  setsid nsenter --net="/run/netns/liqo-$name" -- "$@" >>"$dir/logs/$proc.log" 2>&1 </dev/null &
  echo $! >"$dir/pids/$proc"
}

node_running() { [ -s "$(node_dir "$1")/pids/kube-apiserver" ] && kill -0 "$(cat "$(node_dir "$1")/pids/kube-apiserver")" 2>/dev/null; }

# The lowest index 1..40 no other node holds; written to NAME/index.
node_new_index() {
  local i taken
  for i in $(seq 1 40); do
    taken=$(grep -lx "$i" "$LIQO_NODES_DIR"/*/index 2>/dev/null | grep -v "^$LIQO_NODES_DIR/$1/index\$" || true)
    if [ -z "$taken" ]; then
      echo "$i" >"$LIQO_NODES_DIR/$1/index"
      echo "$i"
      return
    fi
  done
  fail "no free node index"
}

node_sysctls_save() {
  local saved="$LIQO_NODES_DIR/sysctls.saved" s
  [ -f "$saved" ] && return
  for s in "${NODE_SYSCTLS[@]}"; do
    echo "$s=$(sysctl -n "$s")"
  done >"$saved"
}

node_sysctls_restore() {
  local saved="$LIQO_NODES_DIR/sysctls.saved" line
  [ -f "$saved" ] || return 0
  while read -r line; do sysctl -qw "$line" || true; done <"$saved"
  rm -f "$saved"
}

# The pause image (FROM scratch, Debian's static busybox): a process that waits for its end.
pause_image() {
  local ref=localhost/liqo-pause:1 ctx
  if ! podman image exists "$ref"; then
    ctx="$(mktemp -d)"
    mkdir -p "$ctx/bin"
    cp "$(command -v busybox)" "$ctx/bin/busybox"
    podman build --isolation chroot --quiet --file kind-tests/pause/Containerfile --tag "$ref" "$ctx" >/dev/null
    rm -rf "$ctx"
  fi
  echo "$ref"
}

# import_image NAME IMAGE REF: IMAGE (podman's) into node NAME's containerd as REF.
import_image() {
  local name=$1 image=$2 ref=$3 dir archive
  dir="$(node_dir "$name")"
  archive="$dir/images/$(echo "$image" | tr '/:' '__').tar"
  podman save --quiet --format docker-archive -o "$archive" "$image"
  ctr --address "$dir/containerd.sock" -n k8s.io images import --no-unpack=false "$archive" >/dev/null
  local imported
  imported="$(ctr --address "$dir/containerd.sock" -n k8s.io images ls -q | grep -F "${image#localhost/}" | head -n 1)"
  [ -n "$imported" ] || fail "$image not found in node $name's containerd after import"
  if [ "$imported" != "$ref" ]; then
    ctr --address "$dir/containerd.sock" -n k8s.io images tag --force "$imported" "$ref" >/dev/null
  fi
  rm -f "$archive"
}

# load_as_documented NAME IMAGE: IMAGE (liqo-discovery:<version>, podman's) into node NAME's
# containerd by docs/install.md's two lines for a containerd node, as written (the page's
# version replaced by IMAGE's, ctr pointed at the node's socket): tagged with the name the nodes
# look for, saved and imported. The node must then have that name, with no tag of ours after.
load_as_documented() {
  local name=$1 image=$2 dir version tag save page=docs/install.md
  dir="$(node_dir "$name")"
  version="${image##*:}"
  tag="$(grep -m1 '^    podman tag liqo-discovery:' "$page" | sed 's/ *# .*//; s/^ *//')"
  save="$(grep -m1 '| ctr -n k8s.io images import -' "$page" | sed 's/ *# .*//; s/^ *//')"
  [ -n "$tag" ] && [ -n "$save" ] || fail "$page has no 'podman tag' and 'ctr -n k8s.io images import -' lines to load the image with"
  local documented
  documented="$(echo "$tag" | sed 's/^podman tag liqo-discovery:\([^ ]*\) .*/\1/')"
  tag="${tag//$documented/$version}"
  save="${save//$documented/$version}"
  save="${save/ctr -n/ctr --address $dir/containerd.sock -n}"
  echo "$page, as written: $tag; $save" >&2
  # pipefail: a `podman save` that fails shows as a failure, not as an empty import.
  bash -o pipefail -ec "$tag && $save" >/dev/null
  local ref="docker.io/library/liqo-discovery:$version" tries=0
  listed() { ctr --address "$dir/containerd.sock" -n k8s.io images ls -q | grep -qx "$ref"; }
  until listed || [ $((tries += 1)) -gt 10 ]; do sleep 1; done
  if ! listed; then
    # Seen once in CI (node e2e-b, 2026-12-06): both lines ended well and the image was not
    # there. Said, with what the node has, and the lines run once more.
    echo "--- node $name's images after $page's lines:" >&2
    ctr --address "$dir/containerd.sock" -n k8s.io images ls -q >&2 || true
    echo "$page's lines once more" >&2
    bash -o pipefail -ec "$tag && $save" >/dev/null
    listed || fail "after $page's lines (twice), node $name has no $ref"
  fi
}

node_untainted() {
  ! kubectl get node "$1" -o jsonpath='{.spec.taints[*].key}' | grep -q 'node.kubernetes.io/not-ready'
}
