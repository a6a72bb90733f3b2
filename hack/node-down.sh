#!/usr/bin/env bash
# Removes the real node of hack/node-up.sh: its Node object (pods bound to it are then
# deleted by the cluster), the kubelet, every container and pod sandbox, containerd, the
# mounts under $CLUSTER_DIR/node, the pods' network namespaces, the bridge and the iptables
# rules. Safe to run when the node is down or half up.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${LOCALBIN:-$ROOT/bin}
CLUSTER_DIR=${CLUSTER_DIR:-$ROOT/.cluster}
NODE_NAME=${NODE_NAME:-warpdrive-node}
NODE_BRIDGE=${NODE_BRIDGE:-wdnode0}
NODE_DIR=$CLUSTER_DIR/node
SOCK=$NODE_DIR/containerd.sock
ctr() { command ctr --address "$SOCK" -n k8s.io "$@"; }

stop() { # name: SIGTERM, then SIGKILL after 10 s
  local pidfile=$NODE_DIR/pids/$1 pid
  [[ -f $pidfile ]] || return 0
  pid=$(cat "$pidfile")
  kill "$pid" 2>/dev/null
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null
  rm -f "$pidfile"
}

# The Node object first: the scheduler stops placing pods here, and the pod garbage
# collector deletes the pods bound to it.
if [[ -f $CLUSTER_DIR/kubeconfig ]]; then
  "$BIN/kubectl" --kubeconfig "$CLUSTER_DIR/kubeconfig" delete node "$NODE_NAME" \
    --ignore-not-found --timeout=30s >/dev/null 2>&1
fi
stop kubelet

# Containers and pod sandboxes: kill their tasks (the shims exit with them), then note the
# sandboxes' network namespaces, which containerd mounted under /var/run/netns.
netns=()
if [[ -S $SOCK ]]; then
  for id in $(ctr tasks ls -q 2>/dev/null); do
    ctr tasks kill -s SIGKILL "$id" >/dev/null 2>&1
  done
  for id in $(ctr containers ls -q 2>/dev/null); do
    for ns in $(ctr containers info "$id" 2>/dev/null | jq -r '.Spec.linux.namespaces[]? | select(.type == "network") | .path // empty'); do
      netns+=("$ns")
    done
    for _ in $(seq 50); do ctr tasks delete "$id" >/dev/null 2>&1 && break; ctr tasks ls -q 2>/dev/null | grep -qx "$id" || break; sleep 0.1; done
  done
fi
stop containerd

# Mounts under the node's directory (overlay snapshots, volumes, shm), deepest first.
if [[ -d $NODE_DIR ]]; then
  awk -v dir="$NODE_DIR/" 'index($2, dir) == 1 {print $2}' /proc/self/mounts | sort -r |
    while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
fi
for ns in "${netns[@]}"; do
  [[ $ns == /var/run/netns/* || $ns == /run/netns/* ]] || continue
  umount "$ns" 2>/dev/null; rm -f "$ns"
done

# Network: the bridge (its veths went with the namespaces), the DNAT rule, IP forwarding.
ip link del "$NODE_BRIDGE" 2>/dev/null
iptables -t nat -D PREROUTING -i "$NODE_BRIDGE" -j WARPDRIVE-NODE 2>/dev/null
iptables -t nat -F WARPDRIVE-NODE 2>/dev/null
iptables -t nat -X WARPDRIVE-NODE 2>/dev/null
# The line node-up added to /etc/hosts (rewritten in place: /etc/hosts may be a mount).
if grep -q ' # warpdrive-node-up$' /etc/hosts; then
  hosts=$(grep -v ' # warpdrive-node-up$' /etc/hosts)
  printf '%s\n' "$hosts" >/etc/hosts
fi
if [[ -f $NODE_DIR/ip_forward ]]; then
  sysctl -qw "net.ipv4.ip_forward=$(cat "$NODE_DIR/ip_forward")"
fi

rm -rf "$NODE_DIR"
echo "node $NODE_NAME down"
