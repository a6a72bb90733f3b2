#!/usr/bin/env bash
# Joins one real node to the local cluster (hack/cluster-up.sh): a kubelet built from the
# same k8s.io/kubernetes module as the control plane (make kubelet), Debian's containerd,
# runc and CNI plugins, each started here with its state under $CLUSTER_DIR/node (no systemd).
#
# The node is tainted warpdrive.transwarp.io/real-node=true:NoSchedule and labelled
# warpdrive.transwarp.io/real-node=true: only pods that tolerate the taint run there (the
# operator's, through config/local); workload pods stay on kwok's nodes, and kwok leaves this
# node alone (it manages only nodes annotated kwok.x-k8s.io/node=fake).
#
# No image registry is reachable: the pod sandbox image ($PAUSE_TAR, make pause-image) is
# imported into containerd here, and so must be every image the node runs (make image-load).
#
# Networking: pods get addresses on the bridge $NODE_BRIDGE ($NODE_POD_CIDR), whose gateway
# address is also the node's address. The apiserver of the local cluster listens on loopback
# only and publishes no endpoints for the `kubernetes` Service (--endpoint-reconciler-type=none;
# the API refuses loopback endpoint addresses), so kube-proxy would have nothing to route that
# Service to. Instead one DNAT rule sends the Service's ClusterIP:443, seen from the bridge, to
# the apiserver's loopback port (net.ipv4.conf.<bridge>.route_localnet=1 lets it through):
# in-cluster configuration works unchanged. Pods' other Services are not routed.
#
# The apiserver of the local cluster has no kubelet client certificate, so the kubelet allows
# anonymous requests (logs, exec, port-forward) on the node's address, which exists only on
# this machine's bridge.
#
# Idempotent: when the node is already up and Ready, it does nothing. hack/node-down.sh undoes
# everything this does. Needs root.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${LOCALBIN:-$ROOT/bin}
CLUSTER_DIR=${CLUSTER_DIR:-$ROOT/.cluster}
APISERVER_PORT=${APISERVER_PORT:-16443}
SERVICE_CIDR=${SERVICE_CIDR:-10.96.0.0/16}
NODE_NAME=${NODE_NAME:-warpdrive-node}
NODE_BRIDGE=${NODE_BRIDGE:-wdnode0}
NODE_POD_CIDR=${NODE_POD_CIDR:-10.244.0.0/24}
KUBELET_PORT=${KUBELET_PORT:-10250}
PAUSE_IMAGE=${PAUSE_IMAGE:-localhost/warpdrive-pause:1}
PAUSE_TAR=${PAUSE_TAR:-$BIN/pause-image.tar}

NODE_DIR=$CLUSTER_DIR/node
PKI=$CLUSTER_DIR/pki
LOGS=$CLUSTER_DIR/logs
KUBECONFIG_FILE=$CLUSTER_DIR/kubeconfig
SOCK=$NODE_DIR/containerd.sock
NODE_IP=${NODE_POD_CIDR%.*}.1
SERVICE_IP=${SERVICE_CIDR%.0/*}.1
kubectl() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" "$@"; }
ctr() { command ctr --address "$SOCK" -n k8s.io "$@"; }

[[ $(id -u) == 0 ]] || { echo "node-up: needs root (cgroups, mounts, network)" >&2; exit 1; }
[[ -f $KUBECONFIG_FILE ]] || { echo "node-up: no cluster in $CLUSTER_DIR (make cluster-up)" >&2; exit 1; }
for f in "$BIN/kubelet" "$PAUSE_TAR"; do
  [[ -f $f ]] || { echo "node-up: $f is missing (make kubelet pause-image)" >&2; exit 1; }
done

if [[ -f $NODE_DIR/pids/kubelet ]] && kill -0 "$(cat "$NODE_DIR/pids/kubelet")" 2>/dev/null &&
  kubectl wait --for=condition=Ready "node/$NODE_NAME" --timeout=1s >/dev/null 2>&1; then
  echo "node $NODE_NAME already up"
  exit 0
fi

# --- packages: the runtime, the network plugins and the tools used here come from Debian.
missing=()
command -v containerd >/dev/null || missing+=(containerd)
command -v runc >/dev/null || missing+=(runc)
[[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
command -v iptables >/dev/null || missing+=(iptables)
command -v ip >/dev/null || missing+=(iproute2)
command -v sysctl >/dev/null || missing+=(procps)
command -v jq >/dev/null || missing+=(jq) # hack/node-down.sh reads ctr's JSON with it
[[ -f /etc/ssl/certs/ca-certificates.crt ]] || missing+=(ca-certificates)
if ((${#missing[@]})); then
  echo "node-up: installing ${missing[*]} (apt)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Leftovers of a node that is gone (killed, machine restarted): start clean.
CLUSTER_DIR=$CLUSTER_DIR "$ROOT/hack/node-down.sh" >/dev/null 2>&1 || true
mkdir -p "$NODE_DIR"/{pids,cni,kubelet,pod-logs} "$LOGS"

wait_for() { # what seconds command...
  local what=$1 secs=$2; shift 2
  for ((i = 0; i < secs * 5; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  echo "node-up: timed out waiting for $what; logs in $LOGS" >&2
  exit 1
}
start() { # name args...
  local name=$1; shift
  nohup "$@" >"$LOGS/$name.log" 2>&1 &
  echo $! >"$NODE_DIR/pids/$name"
}

# --- the node's client certificate: the Node authorizer and NodeRestriction admission
# know it as system:node:<name> in system:nodes.
openssl req -newkey rsa:2048 -nodes -subj "/O=system:nodes/CN=system:node:$NODE_NAME" \
  -keyout "$NODE_DIR/kubelet.key" -out "$NODE_DIR/kubelet.csr" >/dev/null 2>&1
openssl x509 -req -in "$NODE_DIR/kubelet.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
  -days 3650 -extfile "$PKI/client.ext" -out "$NODE_DIR/kubelet.crt" >/dev/null 2>&1
cat >"$NODE_DIR/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: warpdrive-local
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority: $PKI/ca.crt
users:
- name: node
  user:
    client-certificate: $NODE_DIR/kubelet.crt
    client-key: $NODE_DIR/kubelet.key
contexts:
- name: node
  context: {cluster: warpdrive-local, user: node}
current-context: node
KC

# --- network: the bridge (the CNI bridge plugin adopts it) and the route to the apiserver.
ip link add "$NODE_BRIDGE" type bridge
ip addr add "$NODE_IP/${NODE_POD_CIDR#*/}" dev "$NODE_BRIDGE"
ip link set "$NODE_BRIDGE" up
sysctl -qw "net.ipv4.conf.$NODE_BRIDGE.route_localnet=1"
# The CNI bridge plugin turns on IP forwarding for its gateway; node-down restores this value.
sysctl -n net.ipv4.ip_forward >"$NODE_DIR/ip_forward"
iptables -t nat -N WARPDRIVE-NODE
iptables -t nat -A WARPDRIVE-NODE -d "$SERVICE_IP/32" -p tcp --dport 443 \
  -j DNAT --to-destination "127.0.0.1:$APISERVER_PORT"
iptables -t nat -I PREROUTING -i "$NODE_BRIDGE" -j WARPDRIVE-NODE
cat >"$NODE_DIR/cni/10-warpdrive.conflist" <<CNI
{
  "cniVersion": "0.4.0",
  "name": "warpdrive-node",
  "plugins": [{
    "type": "bridge",
    "bridge": "$NODE_BRIDGE",
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "dataDir": "$NODE_DIR/cni-ipam",
      "ranges": [[{"subnet": "$NODE_POD_CIDR", "gateway": "$NODE_IP"}]],
      "routes": [{"dst": "0.0.0.0/0"}]
    }
  }]
}
CNI

# The apiserver reaches a kubelet (logs, exec) at the node's Hostname address first: make the
# node's name resolve to its address on this machine.
printf '%s %s # warpdrive-node-up\n' "$NODE_IP" "$NODE_NAME" >>/etc/hosts

# --- containerd, with its own root, state and socket, and the CRI plugin set up for the
# kubelet: cgroupfs (no systemd), the local pause image, the CNI configuration above.
cat >"$NODE_DIR/containerd.toml" <<TOML
version = 2
root = "$NODE_DIR/containerd/root"
state = "$NODE_DIR/containerd/state"
[grpc]
  address = "$SOCK"
[plugins."io.containerd.internal.v1.opt"]
  path = "$NODE_DIR/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # The kubelet asks for oom_score_adj -998 for pod sandboxes; lowering a score needs
  # CAP_SYS_RESOURCE, which the machines here do not give root ("nsexec: failed to update
  # /proc/self/oom_score_adj: Permission denied"). Scores are kept at containerd's or above.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$NODE_DIR/cni"
TOML
start containerd containerd --config "$NODE_DIR/containerd.toml"
wait_for containerd 30 ctr version
ctr images import "$PAUSE_TAR" >/dev/null

# --- the kubelet. failCgroupV1: false because this machine has cgroups v1; image garbage
# collection off in effect (the images here cannot be pulled again); eviction thresholds
# low, since the disk is shared with everything else.
cat >"$NODE_DIR/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://$SOCK
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 0
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
  x509: {clientCAFile: $PKI/ca.crt}
authorization:
  mode: AlwaysAllow
podLogsDir: $NODE_DIR/pod-logs
clusterDomain: cluster.local
registerWithTaints:
- key: warpdrive.transwarp.io/real-node
  value: "true"
  effect: NoSchedule
maxPods: 20
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  imagefs.available: 1%
  nodefs.inodesFree: 1%
YAML
start kubelet "$BIN/kubelet" --config="$NODE_DIR/kubelet.yaml" --kubeconfig="$NODE_DIR/kubeconfig" \
  --root-dir="$NODE_DIR/kubelet" --cert-dir="$NODE_DIR/kubelet/pki" \
  --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" \
  --node-labels="warpdrive.transwarp.io/real-node=true,type=real"
wait_for "node $NODE_NAME to register" 60 kubectl get node "$NODE_NAME"
wait_for "node $NODE_NAME Ready" 120 kubectl wait --for=condition=Ready "node/$NODE_NAME" --timeout=1s
echo "node $NODE_NAME up ($NODE_IP); logs in $LOGS/{containerd,kubelet}.log"
