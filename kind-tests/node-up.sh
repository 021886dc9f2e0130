#!/usr/bin/env bash
# A real single-node Kubernetes cluster on this machine, in a network namespace of its own
# (`just node-up NAME`): etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet
# and kube-proxy (v1.36, from LIQO_KUBE_BIN, default /opt/kubebuilder-assets), containerd + runc
# with a CNI bridge, our image and a pause image (FROM scratch, Debian's static busybox) imported.
# Prints KUBECONFIG=<path> as its last line: a kubeconfig that works from this shell.
# `just node-down NAME` (node-down.sh) removes everything it made.
#
#   kind-tests/node-up.sh NAME [IMAGE]     IMAGE: our image, built (image/build.sh) if absent;
#                                          `none`: no image of ours (load one later, as kind does)
#
# Networks (index I of the node, 1..40): the node at 10.213.0.(10+I) on bridge liqo-nodes
# (10.213.0.1, this machine's end); pods 10.214.I.0/24 and Services 10.215.I.0/24 exist only
# inside the node's namespace. The node's namespace has no default route and pods only routes to
# the node, Service and node-bridge ranges: nothing they send can leave the machine.
#
# Needs: kube-apiserver, etcd, kubelet, kube-controller-manager, kube-scheduler, kube-proxy in
# LIQO_KUBE_BIN; Debian's containerd, runc, containernetworking-plugins, busybox-static,
# iptables, podman, openssl, iproute2. Without them it says what is missing and exits 3.
set -euo pipefail
cd "$(dirname "$0")/.."
. kind-tests/node-lib.sh

name="${1:-}"
[[ "$name" =~ ^[a-z][a-z0-9-]{0,14}$ ]] || { echo "usage: node-up.sh NAME [IMAGE]  (NAME: a-z0-9-, at most 15)" >&2; exit 2; }
image="${2:-liqo-discovery:$(image/version.sh)}"
missing="$(node_missing)"
if [ -n "$missing" ]; then
  echo "SKIPPED: node $name needs $missing" >&2
  exit 3
fi

dir="$(node_dir "$name")"
if [ -f "$dir/index" ] && node_running "$name"; then
  say "node $name is up already"
  echo "KUBECONFIG=$dir/kubeconfig"
  exit 0
fi
"$(dirname "$0")/../kind-tests/node-down.sh" "$name" >/dev/null 2>&1 || true
mkdir -p "$dir"/{pki,logs,pod-logs,etcd,kubelet,containerd,cni/net.d,cni/cache,images}
index="$(node_new_index "$name")"
ip="10.213.0.$((10 + index))"
pods="10.214.$index.0/24"
services="10.215.$index.0/24"
api_service="10.215.$index.1"
ns="liqo-$name"
bin="$LIQO_KUBE_BIN"
say "node $name: index $index, address $ip, pods $pods, Services $services"

# --- network: the bridge here, a namespace with the node's end of a veth ---
node_sysctls_save
ip() { command ip "$@" || fail "node $name: ip $* failed"; }
nsrun() { local n=$1; shift; nsenter --net="/run/netns/$n" -- "$@" || fail "node $name: $* (in $n) failed"; }
if ! command ip link show liqo-nodes >/dev/null 2>&1; then
  ip link add liqo-nodes type bridge
  ip addr add 10.213.0.1/24 dev liqo-nodes
  # The nodes' mDNS (LAN discovery between them) crosses the bridge; this machine's end of it
  # takes no part in multicast.
  ip link set liqo-nodes multicast off
  ip link set liqo-nodes up
fi
ip netns add "$ns"
ip link add "lq${index}h" type veth peer name "lq${index}n"
ip link set "lq${index}h" master liqo-nodes up
ip link set "lq${index}n" netns "$ns"
nsrun "$ns" ip link set lo up
nsrun "$ns" ip link set "lq${index}n" name eth0
nsrun "$ns" ip addr add "$ip/24" dev eth0
nsrun "$ns" ip link set eth0 up
# The pods' bridge, made here so that the Service range can be routed to it before any pod.
nsrun "$ns" ip link add cni0 type bridge
nsrun "$ns" ip addr add "10.214.$index.1/24" dev cni0
nsrun "$ns" ip link set cni0 up
nsrun "$ns" ip route add "$services" dev cni0
nsrun "$ns" sysctl -qw net.ipv4.ip_forward=1
# Nothing beyond the node bridge is routed from the node: an address out there is unreachable.
route="$(nsenter --net="/run/netns/$ns" -- ip route get 192.0.2.1 2>&1 || true)"
case "$route" in *unreachable*) ;; *) fail "node $name's namespace routes an outside address: $route" ;; esac

# --- certificates and identities ---
pki="$dir/pki"
openssl_quiet() { openssl "$@" 2>/dev/null; }
openssl_quiet req -x509 -newkey rsa:2048 -nodes -keyout "$pki/ca.key" -out "$pki/ca.crt" -days 30 -subj "/CN=liqo-node-$name-ca"
cat >"$pki/apiserver.ext" <<EOF
subjectAltName=IP:$ip,IP:$api_service,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
extendedKeyUsage=serverAuth
EOF
openssl_quiet req -newkey rsa:2048 -nodes -keyout "$pki/apiserver.key" -out "$pki/apiserver.csr" -subj "/CN=kube-apiserver"
openssl_quiet x509 -req -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 30 -extfile "$pki/apiserver.ext" -out "$pki/apiserver.crt"
printf 'extendedKeyUsage=clientAuth\n' >"$pki/client.ext"
openssl_quiet req -newkey rsa:2048 -nodes -keyout "$pki/kubelet-client.key" -out "$pki/kubelet-client.csr" -subj "/O=system:masters/CN=kube-apiserver-kubelet-client"
openssl_quiet x509 -req -in "$pki/kubelet-client.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 30 -extfile "$pki/client.ext" -out "$pki/kubelet-client.crt"
openssl_quiet genrsa -out "$pki/sa.key" 2048
openssl_quiet rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub"
token() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
admin_token="$(token)"
{
  echo "$admin_token,admin,admin,system:masters"
  echo "$(token),system:kube-controller-manager,kcm"
  echo "$(token),system:kube-scheduler,scheduler"
  echo "$(token),system:node:$name,kubelet-$name,system:nodes"
  echo "$(token),system:kube-proxy,kube-proxy"
} >"$pki/tokens.csv"
chmod 600 "$pki"/*.key "$pki/tokens.csv"
kubeconfig() { # FILE USER SERVER
  local t
  t="$(awk -F, -v u="$2" '$2 == u {print $1}' "$pki/tokens.csv")"
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: $name
  cluster: {server: "$3", certificate-authority: "$pki/ca.crt"}
users:
- name: $2
  user: {token: "$t"}
contexts:
- name: $name
  context: {cluster: $name, user: "$2"}
current-context: $name
EOF
}
kubeconfig "$dir/kubeconfig" admin "https://$ip:6443"
kubeconfig "$dir/kcm.kubeconfig" system:kube-controller-manager "https://127.0.0.1:6443"
kubeconfig "$dir/scheduler.kubeconfig" system:kube-scheduler "https://127.0.0.1:6443"
kubeconfig "$dir/kubelet.kubeconfig" "system:node:$name" "https://127.0.0.1:6443"
kubeconfig "$dir/proxy.kubeconfig" system:kube-proxy "https://127.0.0.1:6443"
export KUBECONFIG="$dir/kubeconfig"

# --- the control plane ---
start "$name" etcd "$bin/etcd" --name default --data-dir "$dir/etcd" --unsafe-no-fsync \
  --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
  --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
  --initial-cluster default=http://127.0.0.1:2380
start "$name" kube-apiserver "$bin/kube-apiserver" --etcd-servers=http://127.0.0.1:2379 \
  --bind-address=0.0.0.0 --advertise-address="$ip" --secure-port=6443 \
  --service-cluster-ip-range="$services" --service-node-port-range=30000-32767 \
  --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
  --client-ca-file="$pki/ca.crt" --token-auth-file="$pki/tokens.csv" \
  --authorization-mode=Node,RBAC --allow-privileged=true \
  --service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$pki/sa.pub" \
  --service-account-signing-key-file="$pki/sa.key" \
  --kubelet-client-certificate="$pki/kubelet-client.crt" --kubelet-client-key="$pki/kubelet-client.key" \
  --kubelet-preferred-address-types=InternalIP
wait_for 90 "the API server of $name ready" kubectl get --raw /readyz
wait_for 60 "the API server of $name publishing its OpenAPI" kubectl get --raw /openapi/v2
start "$name" kube-controller-manager "$bin/kube-controller-manager" --kubeconfig="$dir/kcm.kubeconfig" \
  --authentication-kubeconfig="$dir/kcm.kubeconfig" --authorization-kubeconfig="$dir/kcm.kubeconfig" \
  --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
  --use-service-account-credentials=true --leader-elect=false --bind-address=127.0.0.1 \
  --cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
  --node-monitor-grace-period=20s
start "$name" kube-scheduler "$bin/kube-scheduler" --kubeconfig="$dir/scheduler.kubeconfig" \
  --authentication-kubeconfig="$dir/scheduler.kubeconfig" --authorization-kubeconfig="$dir/scheduler.kubeconfig" \
  --leader-elect=false --bind-address=127.0.0.1

# --- containerd, CNI, images ---
cat >"$dir/containerd/config.toml" <<EOF
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$dir/containerd.sock"
[ttrpc]
  address = "$dir/containerd.sock.ttrpc"
[debug]
  address = "$dir/containerd-debug.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/liqo-pause:1"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$LIQO_CNI_BIN"
    conf_dir = "$dir/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$dir/runc"
EOF
cat >"$dir/cni/net.d/10-liqo-node.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "liqo-node-$name",
  "plugins": [
    {
      "type": "bridge", "bridge": "cni0", "isGateway": true, "hairpinMode": true, "ipMasq": true,
      "ipam": {
        "type": "host-local", "dataDir": "$dir/cni/ipam",
        "ranges": [[{"subnet": "$pods", "gateway": "10.214.$index.1"}]],
        "routes": [{"dst": "$services"}, {"dst": "10.213.0.0/24"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
start "$name" containerd containerd --config "$dir/containerd/config.toml"
wait_for 30 "containerd of $name answering" ctr --address "$dir/containerd.sock" version
import_image "$name" "$(pause_image)" localhost/liqo-pause:1
if [ "$image" != none ]; then
  if ! podman image exists "$image"; then
    say "building $image"
    image/build.sh "$image" >/dev/null
  fi
  case "${image#localhost/}" in
    liqo-discovery:[0-9]*) load_as_documented "$name" "${image#localhost/}" ;;
    *) import_image "$name" "$image" "docker.io/library/${image#localhost/}" ;;
  esac
fi

# --- the node: kubelet and kube-proxy ---
# kubelet's cgroup root, in every hierarchy (cgroup v1 here; cpuset's inherits its parent's set).
for h in /sys/fs/cgroup/*/; do
  case "$h" in */unified/) continue ;; esac
  mkdir -p "$h/liqo-$name"
done
if [ -d /sys/fs/cgroup/cpuset/liqo-$name ]; then
  cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset/liqo-$name/cpuset.cpus"
  cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset/liqo-$name/cpuset.mems"
fi
cat >"$dir/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /liqo-$name
failSwapOn: false
address: $ip
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
containerRuntimeEndpoint: unix://$dir/containerd.sock
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
resolvConf: ""
# Each node its own: a kubelet deletes the log folders of pods it does not know.
podLogsDir: $dir/pod-logs
enforceNodeAllocatable: []
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
protectKernelDefaults: false
EOF
start "$name" kubelet "$bin/kubelet" --config="$dir/kubelet/config.yaml" --kubeconfig="$dir/kubelet.kubeconfig" \
  --root-dir="$dir/kubelet" --cert-dir="$dir/kubelet/pki" --hostname-override="$name" --node-ip="$ip"
cat >"$dir/proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $dir/proxy.kubeconfig}
mode: iptables
clusterCIDR: $pods
hostnameOverride: $name
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
oomScoreAdj: 0
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
EOF
start "$name" kube-proxy "$bin/kube-proxy" --config="$dir/proxy.yaml"

wait_for 90 "node $name Ready" kubectl wait --for=condition=Ready "node/$name" --timeout=5s
wait_for 60 "node $name without the not-ready taint" node_untainted "$name"
wait_for 60 "ServiceAccount default in namespace default" kubectl get serviceaccount default
say "node $name is up: kubectl --kubeconfig $dir/kubeconfig get nodes"
echo "KUBECONFIG=$dir/kubeconfig"
