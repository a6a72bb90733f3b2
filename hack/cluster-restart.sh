#!/usr/bin/env bash
# Restarts one process of the local cluster (make cluster-up), as a crash and a supervisor's
# restart would: usage `hack/cluster-restart.sh <component>`, where component is a file of
# $CLUSTER_DIR/pids (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok).
#
# The command line is read from the running process (/proc/<pid>/cmdline), so cluster-up.sh
# stays the one place that knows it. The process is killed (SIGNAL, default KILL: a crash)
# and started again with the same arguments, the same working directory, its log appended
# to the same file and its new pid in the same pid file; then the script waits until the
# component answers again (etcd: /health; kube-apiserver: /readyz).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${LOCALBIN:-$ROOT/bin}
CLUSTER_DIR=${CLUSTER_DIR:-$ROOT/.cluster}
SIGNAL=${SIGNAL:-KILL}
name=${1:?usage: $0 <component> (one of: $(ls "$CLUSTER_DIR/pids" 2>/dev/null | xargs))}
pidfile=$CLUSTER_DIR/pids/$name
log=$CLUSTER_DIR/logs/$name.log

pid=$(cat "$pidfile")
[[ -r /proc/$pid/cmdline ]] || { echo "$name (pid $pid) is not running" >&2; exit 1; }
mapfile -d '' args <"/proc/$pid/cmdline"
cwd=$(readlink "/proc/$pid/cwd")

kill "-$SIGNAL" "$pid"
for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then
  kill -KILL "$pid"
  sleep 0.5
fi

# The same detached start as cluster-up.sh: nothing of this shell (stdin, stdout) is kept.
cd "$cwd"
nohup "${args[@]}" >>"$log" 2>&1 </dev/null &
echo $! >"$pidfile"
echo "$name restarted: pid $pid -> $!"

healthy() {
  case $name in
  etcd)
    local url
    url=$(printf '%s\n' "${args[@]}" | sed -n 's/^--listen-client-urls=\([^,]*\).*/\1/p')
    curl -sf "$url/health" ;;
  kube-apiserver)
    "$BIN/kubectl" --kubeconfig "$CLUSTER_DIR/kubeconfig" get --raw /readyz ;;
  *)
    kill -0 "$(cat "$pidfile")" ;;
  esac
}
for _ in $(seq 450); do
  if healthy >/dev/null 2>&1; then
    echo "$name healthy"
    exit 0
  fi
  kill -0 "$(cat "$pidfile")" 2>/dev/null || { echo "$name exited; see $log" >&2; exit 1; }
  sleep 0.2
done
echo "timed out waiting for $name; see $log" >&2
exit 1
