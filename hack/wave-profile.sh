#!/usr/bin/env bash
# The manager's CPU, RSS and profiles through a wave of creates, a wave of edits and a wave of
# deletes of N AppService CRs (docs/bench/findings.md, "The rollout's list from the cache"):
#
#   hack/wave-profile.sh N        OUT (default .cluster/wave-profile) receives the figures
#
# REPLICAS (default 2) is each CR's replicas; the edit sets REPLICAS+1, or with REPLICAS=0
# (for more CRs than the fake nodes hold pods) the pods' CPU request 50m -> 60m instead, as
# make bench does at 10,000 CRs.
#
# MANAGER_FLAGS are added after the pod's arguments (the last of a flag wins), to measure
# another value: MANAGER_FLAGS=--max-concurrent-reconciles=8 hack/wave-profile.sh 500
#
# Runs bin/manager and its sidecar against $KUBECONFIG with the arguments of config/default's
# Deployment (as make run does) plus pprof on loopback; creates N AppServices in the
# namespace wave-profile and waits until all are Ready; edits every one (replicas 2 -> 3, a
# Helm upgrade each) and waits until all are Ready at their new generation; deletes them and
# waits until they and their Deployments and Services are gone. Writes to OUT:
#   summary            wall time and the manager's CPU-s of each wave, RSS (MiB) after creating
#   allocs0/1.pb.gz    allocation profiles before and after the creates
#                      (go tool pprof -sample_index=alloc_space -base allocs0.pb.gz allocs1.pb.gz)
#   create-cpu.pb.gz   a 40 s CPU profile from the start of the creates
#   edit-cpu.pb.gz     a 40 s CPU profile from the start of the edits
#   delete-cpu.pb.gz   a 30 s CPU profile from the start of the deletes
#   sidecar-{create,edit,delete}-cpu.pb.gz
#                      the sidecar's, over the same windows
#   {create,edit,delete}-processes
#                      CPU-s of each process of the cluster and the operator through each
#                      wave: what the wave cost the machine, not only the manager
#   {create,edit,delete}-requests
#                      the apiserver's requests through each wave, from every client, per
#                      CR, by verb, resource, subresource and code, most first
#   {create,edit,delete}-reconciles
#                      the manager's reconciles through each wave, per CR, by controller
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
: "${KUBECONFIG:?set KUBECONFIG (the local cluster: .cluster/kubeconfig)}"
export KUBECONFIG
N=${1:?usage: hack/wave-profile.sh N}
REPLICAS=${REPLICAS:-2}
OUT=${OUT:-$ROOT/.cluster/wave-profile}
NS=wave-profile LEASE_NS=warpdrive-operator-system K=$ROOT/bin/kubectl
cd "$ROOT"
. hack/pod-processes.sh
mkdir -p "$OUT"
"$K" apply --server-side --force-conflicts -f config/crd/bases >/dev/null
"$K" get namespace "$LEASE_NS" >/dev/null 2>&1 || "$K" create namespace "$LEASE_NS" >/dev/null
"$K" create namespace "$NS" >/dev/null
read -ra manager_flags <<<"${MANAGER_FLAGS:-}"
start_pod "$OUT"
trap 'kill $m $s 2>/dev/null || true; "$K" delete namespace $NS --wait=false >/dev/null 2>&1 || true' EXIT
sleep 8
pprof() { curl -sf "http://127.0.0.1:16060/debug/pprof/$1" -o "$OUT/$2"; }
spprof() { curl -sf "http://127.0.0.1:16061/debug/pprof/$1" -o "$OUT/sidecar-$2"; }
cpu() { awk '{print ($14 + $15) / 100}' "/proc/$m/stat"; }
rss() { awk '/^(VmRSS|VmHWM|RssAnon|RssFile|Pss):/ {printf "%s %d ", $1, $2 / 1024} END {print ""}' "/proc/$1/status" "/proc/$1/smaps_rollup"; }
# procs prints "name CPU-s" for the cluster's processes and the operator's two.
procs() {
  for name in etcd kube-apiserver kube-controller-manager kube-scheduler kwok; do
    pgrep -f "^$ROOT/bin/$name " | while read -r pid; do awk -v n="$name" '{print n, ($14 + $15) / 100}' "/proc/$pid/stat"; done
  done
  awk '{print "manager", ($14 + $15) / 100}' "/proc/$m/stat"
  awk '{print "sidecar", ($14 + $15) / 100}' "/proc/$s/stat"
}
cpuDiff() { awk 'NR == FNR { a[$1] = $2; next } { printf "%-24s %7.2f CPU-s\n", $1, $2 - a[$1] }' "$1" "$2"; }
# idle is the machine's idle CPU time so far, in seconds of one core (/proc/stat).
idle() { awk '/^cpu / {print $5 / 100}' /proc/stat; }
since() { echo "$(date +%s.%N) - $1" | bc; }
# requests prints the apiserver's request counters, one "verb resource/subresource code count"
# per line, summed over the other labels (group, version, scope, component); perCR turns two
# such snapshots into the difference per CR, most first.
requests() {
  "$K" get --raw /metrics | awk '/^apiserver_request_total\{/ {
    match($0, /verb="[^"]*"/); v = substr($0, RSTART + 6, RLENGTH - 7)
    match($0, /[{,]resource="[^"]*"/); r = substr($0, RSTART + 11, RLENGTH - 12)
    match($0, /subresource="[^"]*"/); sr = substr($0, RSTART + 13, RLENGTH - 14)
    match($0, /code="[^"]*"/); c = substr($0, RSTART + 6, RLENGTH - 7)
    n[v " " r (sr == "" ? "" : "/" sr) " " c] += $NF }
    END { for (k in n) print k, n[k] }'
}
# reconciles prints the manager's reconciles so far, "controller - - count" per controller
# (in perCR's format).
reconciles() {
  curl -sf http://127.0.0.1:16062/metrics | awk '/^controller_runtime_reconcile_total\{/ {
    match($0, /controller="[^"]*"/); n[substr($0, RSTART + 12, RLENGTH - 13)] += $NF }
    END { for (k in n) print k, "-", "-", n[k] }'
}
perCR() {
  awk -v n="$N" 'NR == FNR { before[$1 " " $2 " " $3] = $4; next }
    { d = $4 - before[$1 " " $2 " " $3]; if (d > 0) { printf "%8.2f %s %s %s\n", d / n, $1, $2, $3; total += d } }
    END { printf "%8.2f total\n", total / n }' "$1" "$2" | sort -rn
}

pprof allocs allocs0.pb.gz
requests >"$OUT/.requests0"
reconciles >"$OUT/.reconciles0"
procs >"$OUT/.procs0"
t0=$(date +%s.%N) c0=$(cpu) i0=$(idle)
# appservices R [SPEC]: the N CRs' manifests with R replicas, and SPEC's lines in their spec.
appservices() {
  for i in $(seq 0 $((N - 1))); do
    printf 'apiVersion: appcontroller.k8s.io/v1alpha1\nkind: AppService\nmetadata:\n  name: app-%04d\n  namespace: %s\nspec:\n  deploymentName: app-%04d\n  replicas: %d\n%s---\n' "$i" "$NS" "$i" "$1" "${2:-}"
  done
}
appservices "$REPLICAS" | "$K" create -f - >/dev/null
pprof "profile?seconds=40" create-cpu.pb.gz &
p=$!
spprof "profile?seconds=40" create-cpu.pb.gz &
sp=$!
"$K" wait --for=condition=Ready appservices --all -n "$NS" --timeout=30m >/dev/null
echo "create: all Ready after $(since "$t0") s, manager CPU $(echo "$(cpu) - $c0" | bc) s, machine idle $(echo "$(idle) - $i0" | bc) core-s of $(nproc)" | tee "$OUT/summary"
requests >"$OUT/.requests1"
reconciles >"$OUT/.reconciles1"
procs >"$OUT/.procs1"
wait "$p" "$sp"
pprof allocs allocs1.pb.gz
echo "manager: $(rss $m)" | tee -a "$OUT/summary"
echo "sidecar: $(rss $s)" | tee -a "$OUT/summary"

requests >"$OUT/.requests2"
reconciles >"$OUT/.reconciles2"
procs >"$OUT/.procs2"
t0=$(date +%s.%N) c0=$(cpu) i0=$(idle)
if [ "$REPLICAS" -gt 0 ]; then
  appservices $((REPLICAS + 1))
else
  appservices 0 $'  resources:\n    requests:\n      cpu: 60m\n      memory: 64Mi\n'
fi | "$K" apply --server-side --force-conflicts -f - >/dev/null
pprof "profile?seconds=40" edit-cpu.pb.gz &
p=$!
spprof "profile?seconds=40" edit-cpu.pb.gz &
sp=$!
# Ready at the new generation (kubectl wait reads the condition's observedGeneration).
"$K" wait --for=condition=Ready appservices --all -n "$NS" --timeout=30m >/dev/null
echo "edit: all Ready after $(since "$t0") s, manager CPU $(echo "$(cpu) - $c0" | bc) s, machine idle $(echo "$(idle) - $i0" | bc) core-s of $(nproc)" | tee -a "$OUT/summary"
requests >"$OUT/.requests3"
reconciles >"$OUT/.reconciles3"
procs >"$OUT/.procs3"
wait "$p" "$sp"

requests >"$OUT/.requests4"
reconciles >"$OUT/.reconciles4"
procs >"$OUT/.procs4"
t0=$(date +%s.%N) c0=$(cpu) i0=$(idle)
"$K" delete appservices --all -n "$NS" --wait=false >/dev/null
pprof "profile?seconds=30" delete-cpu.pb.gz &
p=$!
spprof "profile?seconds=30" delete-cpu.pb.gz &
sp=$!
while [ "$("$K" get appservices -n "$NS" --no-headers 2>/dev/null | wc -l)" != 0 ]; do sleep 1; done
while [ "$("$K" get deployments,services -n "$NS" --no-headers 2>/dev/null | wc -l)" != 0 ]; do sleep 1; done
echo "delete: all gone after $(since "$t0") s, manager CPU $(echo "$(cpu) - $c0" | bc) s, machine idle $(echo "$(idle) - $i0" | bc) core-s of $(nproc)" | tee -a "$OUT/summary"
requests >"$OUT/.requests5"
reconciles >"$OUT/.reconciles5"
procs >"$OUT/.procs5"
cpuDiff "$OUT/.procs0" "$OUT/.procs1" >"$OUT/create-processes"
cpuDiff "$OUT/.procs2" "$OUT/.procs3" >"$OUT/edit-processes"
cpuDiff "$OUT/.procs4" "$OUT/.procs5" >"$OUT/delete-processes"
perCR "$OUT/.requests0" "$OUT/.requests1" >"$OUT/create-requests"
perCR "$OUT/.requests2" "$OUT/.requests3" >"$OUT/edit-requests"
perCR "$OUT/.requests4" "$OUT/.requests5" >"$OUT/delete-requests"
perCR "$OUT/.reconciles0" "$OUT/.reconciles1" >"$OUT/create-reconciles"
perCR "$OUT/.reconciles2" "$OUT/.reconciles3" >"$OUT/edit-reconciles"
perCR "$OUT/.reconciles4" "$OUT/.reconciles5" >"$OUT/delete-reconciles"
wait "$p" "$sp"
