#!/usr/bin/env bash
# Stops the local test cluster started by cluster-up.sh and deletes its state.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CLUSTER_DIR=${CLUSTER_DIR:-$ROOT/.cluster}

# The real node first (hack/node-up.sh): its containers, mounts and network live under
# $CLUSTER_DIR/node and outside it.
if [[ -d $CLUSTER_DIR/node ]]; then
  CLUSTER_DIR=$CLUSTER_DIR "$ROOT/hack/node-down.sh"
fi

# Stop in the reverse order of start, so that nothing logs errors about what is already gone.
for name in kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do
  pidfile=$CLUSTER_DIR/pids/$name
  [[ -f $pidfile ]] || continue
  pid=$(cat "$pidfile")
  kill "$pid" 2>/dev/null
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null
  rm -f "$pidfile"
done
rm -rf "$CLUSTER_DIR"
echo "cluster down"
