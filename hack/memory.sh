#!/usr/bin/env bash
# Memory of the operator's two processes at N AppService CRs (docs/bench/memory.md):
#
#   hack/memory.sh <label> [N]
#
# runs bin/manager and bin/sidecar against $KUBECONFIG with the flags of
# config/manager/manager.yaml (plus --pprof-bind-address on loopback), creates N AppService
# CRs (a Deployment of 2 replicas and a Service each) in the namespace memory-bench, waits
# until every CR is Ready and then IDLE seconds more, and writes to $OUT (default
# .cluster/memory/<label>):
#   rss.tsv                 VmRSS, VmHWM, RssAnon and RssFile of each process, from
#                           /proc/<pid>/status, in KiB (RssFile: the binary's pages)
#   <process>-heap.pb.gz    its heap profile (after a GC), for go tool pprof
#   <process>-memstats.txt  the Go runtime's memory statistics
# It then deletes the CRs with the operator still running (their releases are uninstalled),
# waits until they are gone, deletes the namespace and stops both processes.
# EXTRA_MANAGER_FLAGS and EXTRA_SIDECAR_FLAGS add flags; MANAGER_ENV and SIDECAR_ENV add
# environment variables (e.g. MANAGER_ENV="GOMEMLIMIT=400MiB").
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${LOCALBIN:-$ROOT/bin}
: "${KUBECONFIG:?set KUBECONFIG (the local cluster: .cluster/kubeconfig)}"
export KUBECONFIG
LABEL=${1:?usage: hack/memory.sh <label> [N]}
N=${2:-1000}
IDLE=${IDLE:-60}
OUT=${OUT:-$ROOT/.cluster/memory/$LABEL}
NS=memory-bench
LEASE_NS=warpdrive-operator-system
K="$BIN/kubectl"
mkdir -p "$OUT"
cd "$ROOT"

"$K" apply --server-side --force-conflicts -f config/crd/bases >/dev/null
"$K" get namespace "$LEASE_NS" >/dev/null 2>&1 || "$K" create namespace "$LEASE_NS" >/dev/null
"$K" get namespace "$NS" >/dev/null 2>&1 && { echo "namespace $NS exists: a previous run was interrupted" >&2; exit 1; }
"$K" create namespace "$NS" >/dev/null

# The container args of config/manager/manager.yaml that matter here (leader election,
# reconcile period, concurrency), with loopback addresses.
env ${MANAGER_ENV:-} "$BIN/manager" --watches-file=watches.yaml --leader-elect --leader-election-namespace="$LEASE_NS" \
  --reconcile-period=1m --max-concurrent-reconciles=2 \
  --metrics-bind-address=0 --health-probe-bind-address=0 --pprof-bind-address=127.0.0.1:16060 \
  ${EXTRA_MANAGER_FLAGS:-} >"$OUT/manager.log" 2>&1 &
manager=$!
env ${SIDECAR_ENV:-} "$BIN/sidecar" --watches-file=watches.yaml --leader-elect --leader-election-namespace="$LEASE_NS" \
  --metrics-bind-address=0 --health-probe-bind-address=0 --pprof-bind-address=127.0.0.1:16061 \
  ${EXTRA_SIDECAR_FLAGS:-} >"$OUT/sidecar.log" 2>&1 &
sidecar=$!
cleanup() {
  echo "deleting the CRs" >&2
  "$K" delete appservices --all -n "$NS" --wait=false >/dev/null 2>&1 || true
  "$K" wait --for=delete appservices --all -n "$NS" --timeout=15m >/dev/null 2>&1 || true
  kill "$manager" "$sidecar" 2>/dev/null || true
  wait "$manager" "$sidecar" 2>/dev/null || true
  "$K" delete namespace "$NS" --wait=true --timeout=10m >/dev/null 2>&1 || true
}
trap cleanup EXIT
sleep 5

echo "creating $N AppServices" >&2
t0=$(date +%s)
for i in $(seq 0 $((N - 1))); do
  printf 'apiVersion: appcontroller.k8s.io/v1alpha1\nkind: AppService\nmetadata:\n  name: app-%04d\n  namespace: %s\nspec:\n  deploymentName: app-%04d\n  replicas: 2\n---\n' "$i" "$NS" "$i"
done | "$K" create -f - >/dev/null
"$K" wait --for=condition=Ready appservices --all -n "$NS" --timeout=30m >/dev/null
echo "all Ready after $(($(date +%s) - t0)) s; idle ${IDLE} s" >&2
sleep "$IDLE"

rss() {
  awk -v p="$1" '/^(VmRSS|VmHWM|RssAnon|RssFile):/ {v[$1]=$2}
    END {print p "\t" v["VmRSS:"] "\t" v["VmHWM:"] "\t" v["RssAnon:"] "\t" v["RssFile:"]}' "/proc/$2/status"
}
{
  printf 'process\tVmRSS_KiB\tVmHWM_KiB\tRssAnon_KiB\tRssFile_KiB\n'
  rss manager "$manager"
  rss sidecar "$sidecar"
} | tee "$OUT/rss.tsv"
for p in manager:16060 sidecar:16061; do
  curl -sf "http://127.0.0.1:${p#*:}/debug/pprof/heap?gc=1" -o "$OUT/${p%%:*}-heap.pb.gz"
  curl -sf "http://127.0.0.1:${p#*:}/debug/pprof/heap?debug=1" | sed -n '/^# runtime.MemStats/,$p' >"$OUT/${p%%:*}-memstats.txt"
done
echo "written to $OUT" >&2
