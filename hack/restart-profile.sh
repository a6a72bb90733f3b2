#!/usr/bin/env bash
# A cold start of the manager and its sidecar over the CRs already in the cluster: how long
# until the manager reconciles first, and what filling their caches costs the machine
# (docs/bench/findings.md, "The initial list as a watch stream"):
#
#   hack/restart-profile.sh      OUT (default .cluster/restart-profile) receives the figures
#
# The CRs are those left by an earlier run, for example make bench-fairness's with
# WARPDRIVE_BENCH_FAIRNESS_KEEP=1; no other operator may be running. KIND (default
# AppService) is the kind whose first reconcile ends the start. LEASE_NS (default default, as
# the test suites and benchmarks run it) holds the Leases and the release signing key: the
# CRs' releases must have been signed with that key, or the manager takes them for forged.
# ENV adds variables to both processes, to measure another setting:
#
#   ENV=KUBE_FEATURE_WatchListClient=false hack/restart-profile.sh
#
# Runs bin/manager and its sidecar against $KUBECONFIG with the arguments of config/default's
# Deployment (as make run does) plus pprof on loopback, and writes to OUT:
#   summary                 seconds from the start to the first reconcile; the CPU-s that
#                           etcd, the apiserver, the manager and the sidecar spent until then;
#                           the two processes' peak RSS (VmHWM, MiB) once the profiles end
#   {manager,sidecar,apiserver}-cpu.pb.gz
#                           CPU profiles over PROFILE_SECONDS (default 30) from the start
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
: "${KUBECONFIG:?set KUBECONFIG (the local cluster: .cluster/kubeconfig)}"
export KUBECONFIG
OUT=${OUT:-$ROOT/.cluster/restart-profile}
KIND=${KIND:-AppService}
SECONDS_PROFILED=${PROFILE_SECONDS:-30}
LEASE_NS=${LEASE_NS:-default} K=$ROOT/bin/kubectl
cd "$ROOT"
. hack/pod-processes.sh
mkdir -p "$OUT"
"$K" get namespace "$LEASE_NS" >/dev/null 2>&1 || "$K" create namespace "$LEASE_NS" >/dev/null
read -ra extra_env <<<"${ENV:-}"
# cpu prints a process's CPU time so far, in hundredths of a second (/proc/PID/stat).
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
apiserver=$(pgrep -f "^$ROOT/bin/kube-apiserver .*--secure-port=$(sed -n 's/.*server: https:\/\/[^:]*:\([0-9]*\).*/\1/p' "$KUBECONFIG")" | head -1)
etcd=$(pgrep -f "^$ROOT/bin/etcd .*$(basename "$(dirname "$KUBECONFIG")")/etcd" | head -1)
a0=$(cpu "$apiserver") e0=$(cpu "$etcd") t0=$(date +%s.%N)
start_pod "$OUT"
trap 'kill $m $s 2>/dev/null || true' EXIT
until curl -sf "http://127.0.0.1:16060/debug/pprof/" >/dev/null && curl -sf "http://127.0.0.1:16061/debug/pprof/" >/dev/null; do
  running || exit 1
  sleep 0.1
done
curl -sf "http://127.0.0.1:16060/debug/pprof/profile?seconds=$SECONDS_PROFILED" -o "$OUT/manager-cpu.pb.gz" &
p1=$!
curl -sf "http://127.0.0.1:16061/debug/pprof/profile?seconds=$SECONDS_PROFILED" -o "$OUT/sidecar-cpu.pb.gz" &
p2=$!
"$K" get --raw "/debug/pprof/profile?seconds=$SECONDS_PROFILED" >"$OUT/apiserver-cpu.pb.gz" &
p3=$!
controller="$(echo "$KIND" | tr '[:upper:]' '[:lower:]')-controller"
# The controller's counters appear at 0 when it starts (warm-up starts it before the Lease), so
# the first reconcile is their sum turning positive.
reconciled() {
  curl -sf http://127.0.0.1:16062/metrics |
    awk -v c="controller=\"$controller\"" 'index($0, "controller_runtime_reconcile_total{" c) == 1 { n += $NF } END { exit !(n > 0) }'
}
until reconciled; do
  running || exit 1
  sleep 0.2
done
first=$(echo "$(date +%s.%N) - $t0" | bc)
# seconds PID [BASE] prints a process's CPU time less BASE, in seconds.
seconds() { echo "($(cpu "$1") - ${2:-0}) / 100" | bc -l | xargs printf '%.2f'; }
spent="etcd $(seconds "$etcd" "$e0") apiserver $(seconds "$apiserver" "$a0") manager $(seconds $m) sidecar $(seconds $s)"
wait "$p1" "$p2" "$p3"
hwm() { awk '/^VmHWM:/ {print int($2 / 1024)}' "/proc/$1/status"; }
{
  echo "first reconcile after $first s"
  echo "CPU-s until then: $spent"
  echo "peak RSS after $SECONDS_PROFILED s: manager $(hwm $m) MiB, sidecar $(hwm $s) MiB"
} | tee "$OUT/summary"
