#!/usr/bin/env bash
# Saves and restores snapshots of the local cluster's etcd (make cluster-up), as the backup of
# a control plane would: usage `hack/etcd-snapshot.sh save <file>` or
# `hack/etcd-snapshot.sh restore <file>`.
#
# save: bin/etcdctl snapshot save from the running etcd.
# restore: kube-apiserver and etcd are stopped, etcd's data directory is replaced by
# the snapshot's (bin/etcdutl snapshot restore; the old one is kept beside it as
# <data dir>.before-restore), and both are started again with their command lines, read from
# the running processes (/proc/<pid>/cmdline) as hack/cluster-restart.sh does; then the
# script waits until they answer. The other components keep running.
#
# The restored revision is bumped and marked compacted, as a restore under running clients
# needs: a client that watches from a revision written after the snapshot
# (controller-manager, scheduler, kwok, any informer) is told its revision was compacted and
# lists again, instead of waiting for a revision that would then mean other data.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${LOCALBIN:-$ROOT/bin}
CLUSTER_DIR=${CLUSTER_DIR:-$ROOT/.cluster}
# More than the revisions any client may have seen after the snapshot.
BUMP_REVISION=${BUMP_REVISION:-1000000000}
usage="usage: $0 save|restore <snapshot file>"
action=${1:?$usage}
file=${2:?$usage}

# args <component>: the command line of a running component, one argument a line.
args() {
  local pid
  pid=$(cat "$CLUSTER_DIR/pids/$1")
  [[ -r /proc/$pid/cmdline ]] || { echo "$1 (pid $pid) is not running" >&2; exit 1; }
  tr '\0' '\n' <"/proc/$pid/cmdline"
}
cwd() { readlink "/proc/$(cat "$CLUSTER_DIR/pids/$1")/cwd"; }
# flag <component args> <name>: the value of --name=value.
flag() { sed -n "s/^--$2=//p" <<<"$1" | head -1; }

etcd_args=$(args etcd)
endpoint=$(flag "$etcd_args" listen-client-urls)
endpoint=${endpoint%%,*}

case $action in
save)
  "$BIN/etcdctl" --endpoints="$endpoint" snapshot save "$file"
  exit 0 ;;
restore) ;;
*) echo "$usage" >&2; exit 1 ;;
esac

[[ -f $file ]] || { echo "no snapshot $file" >&2; exit 1; }
apiserver_args=$(args kube-apiserver)
etcd_cwd=$(cwd etcd)
apiserver_cwd=$(cwd kube-apiserver)

stop() { # component signal
  local pid
  pid=$(cat "$CLUSTER_DIR/pids/$1")
  kill "-$2" "$pid"
  for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$pid"
  sleep 0.5
}
# start <component> <args> <dir>: the same detached start as cluster-up.sh, in the working
# directory it had, its log appended to the same file.
start() {
  local -a argv
  mapfile -t argv <<<"$2"
  (
    cd "$3"
    nohup "${argv[@]}" >>"$CLUSTER_DIR/logs/$1.log" 2>&1 </dev/null &
    echo $! >"$CLUSTER_DIR/pids/$1"
  )
}
wait_for() { # what command...
  local what=$1; shift
  for _ in $(seq 450); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  echo "timed out waiting for $what; logs in $CLUSTER_DIR/logs" >&2
  exit 1
}

# kube-apiserver takes more than 15 s to end on SIGTERM (it drains its requests); what it
# would still write is what the restore throws away.
stop kube-apiserver KILL
stop etcd TERM

data_dir=$(flag "$etcd_args" data-dir)
rm -rf "$data_dir.before-restore"
mv "$data_dir" "$data_dir.before-restore"
"$BIN/etcdutl" snapshot restore "$file" --data-dir="$data_dir" \
  --name="$(flag "$etcd_args" name)" \
  --initial-cluster="$(flag "$etcd_args" initial-cluster)" \
  --initial-advertise-peer-urls="$(flag "$etcd_args" initial-advertise-peer-urls)" \
  --bump-revision="$BUMP_REVISION" --mark-compacted

start etcd "$etcd_args" "$etcd_cwd"
wait_for etcd curl -sf "$endpoint/health"
start kube-apiserver "$apiserver_args" "$apiserver_cwd"
wait_for kube-apiserver "$BIN/kubectl" --kubeconfig "$CLUSTER_DIR/kubeconfig" get --raw /readyz
echo "etcd restored from $file; etcd and kube-apiserver running again"
