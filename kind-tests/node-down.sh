#!/usr/bin/env bash
# Removes node NAME made by node-up.sh (`just node-down NAME`): its containers and processes,
# the network namespaces of its pods, its mounts, cgroups and network namespace, its state; the
# node bridge and the host settings kubelet rewrote go with the last node.
#
#   kind-tests/node-down.sh NAME
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
. kind-tests/node-lib.sh

name="${1:-}"
[ -n "$name" ] || { echo "usage: node-down.sh NAME" >&2; exit 2; }
dir="$(node_dir "$name")"
ns="liqo-$name"
living() { [ -r "/proc/$1/status" ] && ! grep -q '^State:.*Z' "/proc/$1/status"; }
cgroups() { find /sys/fs/cgroup/*/"liqo-$name" /sys/fs/cgroup/"liqo-$name" -maxdepth 0 -type d 2>/dev/null; }

# The pods' network namespaces, known by the processes in the node's cgroups.
pod_netns=()
for cg in $(cgroups); do
  for pid in $(find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u); do
    inode=$(stat -L -c %i "/proc/$pid/ns/net" 2>/dev/null) || continue
    for n in /run/netns/cni-*; do
      [ -e "$n" ] && [ "$(stat -L -c %i "$n" 2>/dev/null)" = "$inode" ] && pod_netns+=("$(basename "$n")")
    done
  done
done

# Processes: the node's own, then containerd's shims, then whatever is left in its cgroups.
if [ -d "$dir/pids" ]; then
  for f in "$dir"/pids/*; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
  done
  for _ in $(seq 1 20); do
    alive=0
    for f in "$dir"/pids/*; do [ -f "$f" ] && living "$(cat "$f")" && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.5
  done
  for f in "$dir"/pids/*; do [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null; done
fi
pkill -9 -f -- "-address $dir/containerd.sock" 2>/dev/null
for _ in 1 2 3; do
  for cg in $(cgroups); do
    find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u | xargs -r kill -9 2>/dev/null
  done
  sleep 0.3
done

for n in $(printf '%s\n' "${pod_netns[@]}" | sort -u); do ip netns delete "$n" 2>/dev/null; done
# Mounts under the node's directory, deepest first.
if [ -d "$dir" ]; then
  awk -v d="$dir/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
  done
fi
for cg in $(cgroups); do find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null; done
# The node's veth pair: deleted by its end here, at once. Deleting the namespace alone leaves
# the kernel tearing the pair down for up to ~90 s, and a node-up meanwhile, which takes the same
# index, failed with `ip link add lqNh type veth ... File exists`.
index="$(cat "$dir/index" 2>/dev/null || true)"
if [ -n "$index" ]; then
  ip link delete "lq${index}h" 2>/dev/null
  for _ in $(seq 1 100); do
    ip link show "lq${index}h" >/dev/null 2>&1 || break
    sleep 0.1
  done
fi
ip netns delete "$ns" 2>/dev/null
# The CNI results cached for its pods (its bridge network, and containerd's loopback by sandbox).
rm -f /var/lib/cni/results/"liqo-node-$name"-* 2>/dev/null
for sandbox in "$dir"/containerd/*/io.containerd.grpc.v1.cri/sandboxes/*; do
  [ -e "$sandbox" ] && rm -f /var/lib/cni/results/cni-loopback-"$(basename "$sandbox")"-* 2>/dev/null
done
rm -rf "$dir"

if ! ls "$LIQO_NODES_DIR"/*/index >/dev/null 2>&1; then
  ip link delete liqo-nodes 2>/dev/null
  node_sysctls_restore
fi
left=""
[ -e "/run/netns/$ns" ] && left+=" netns $ns"
[ -n "$index" ] && ip link show "lq${index}h" >/dev/null 2>&1 && left+=" link lq${index}h"
[ -n "$(cgroups)" ] && left+=" cgroups $(cgroups | tr '\n' ' ')"
awk -v d="$dir/" 'index($2, d) == 1' /proc/self/mounts | grep -q . && left+=" mounts under $dir"
if [ -n "$left" ]; then
  echo "node-down $name: left behind:$left" >&2
  exit 1
fi
say "node $name is down"
