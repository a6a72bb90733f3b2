#!/usr/bin/env bash
# Memory of the operator's two processes at N AppService CRs (docs/bench/memory.md):
#
#   hack/memory.sh N <variant>...      variant: <label>[:<bin dir>[:<env or --flag>...]]
#
# e.g. hack/memory.sh 1000 ours before:/tmp/bin-main gogc50:bin:GOGC=50 norelease:bin:--idle-memory-release=0
#
# Creates N AppService CRs (a Deployment of REPLICAS replicas and a Service each) in the namespace
# memory-bench with the first variant's processes running, and waits until every CR is
# Ready. Then, for each variant in turn, it runs <bin dir>/manager and its sidecar
# (default bin/) against $KUBECONFIG with the flags of config/manager/manager.yaml (plus
# --pprof-bind-address on loopback), the given environment variables and flags (a flag is
# given to both processes), waits WINDOW
# seconds (default 150; the first variant: IDLE seconds, default 60, after all are Ready),
# and writes to $OUT/<label> (default .cluster/memory/<label>):
#   rss.tsv                 VmRSS, VmHWM, RssAnon and RssFile of each process, from
#                           /proc/<pid>/status, and its Pss from /proc/<pid>/smaps_rollup,
#                           in KiB (RssFile: the binary's own pages, which the two processes
#                           share: their Pss sums to what the pod costs, their VmRSS does not)
#   <process>-heap.pb.gz    its heap profile (after a GC), for go tool pprof
#   <process>-memstats.txt  the Go runtime's memory statistics
# Every variant after the first thus starts with N CRs in place: its manager reconciles each
# at start, as after a restart of the pod.
# DROP_CACHES=1 empties the page cache before each variant starts (root only).
# REPLICAS (default 2) is each CR's replicas: the three fake nodes hold 3840 pods, so above
# 1900 CRs use 0.
# At the end the CRs are deleted with the last variant running (their releases are
# uninstalled), and the namespace too.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
: "${KUBECONFIG:?set KUBECONFIG (the local cluster: .cluster/kubeconfig)}"
export KUBECONFIG
N=${1:?usage: hack/memory.sh N <label>[:<bin dir>[:<env>...]]...}
shift
[ $# -gt 0 ] || { echo "no variant" >&2; exit 2; }
IDLE=${IDLE:-60}
REPLICAS=${REPLICAS:-2}
WINDOW=${WINDOW:-150}
OUTROOT=${OUT:-$ROOT/.cluster/memory}
NS=memory-bench
LEASE_NS=warpdrive-operator-system
K="$ROOT/bin/kubectl"
cd "$ROOT"

"$K" apply --server-side --force-conflicts -f config/crd/bases >/dev/null
"$K" get namespace "$LEASE_NS" >/dev/null 2>&1 || "$K" create namespace "$LEASE_NS" >/dev/null
"$K" get namespace "$NS" >/dev/null 2>&1 && { echo "namespace $NS exists: a previous run was interrupted" >&2; exit 1; }
"$K" create namespace "$NS" >/dev/null

manager= sidecar=
# The containers' arguments come from the Deployment of config/default, as make run's and
# the test suites' do (internal/podargs), plus a pprof endpoint on loopback.
podargs() {
  go run ./hack/podargs -kustomize=bin/kustomize -leader-election-namespace="$LEASE_NS" "$@"
}
mapfile -t manager_args < <(podargs -container=manager)
mapfile -t sidecar_args < <(podargs -container=sidecar)
# And the variables the kubelet gives each container from its resources (MEMORY_LIMIT).
mapfile -t manager_env < <(podargs -container=manager -env)
mapfile -t sidecar_env < <(podargs -container=sidecar -env)
# start <bin dir> <out dir> <env or --flag>...: the two containers' processes.
start() {
  local bin=$1 out=$2 arg envs=() flags=()
  shift 2
  for arg in "$@"; do
    if [[ $arg == --* ]]; then flags+=("$arg"); else envs+=("$arg"); fi
  done
  env "${manager_env[@]}" "${envs[@]}" "$bin/manager" "${manager_args[@]}" "${flags[@]}" --pprof-bind-address=127.0.0.1:16060 >"$out/manager.log" 2>&1 &
  manager=$!
  env "${sidecar_env[@]}" "${envs[@]}" "$bin/manager" "${sidecar_args[@]}" "${flags[@]}" --pprof-bind-address=127.0.0.1:16061 >"$out/sidecar.log" 2>&1 &
  sidecar=$!
}
stop() {
  [ -n "$manager" ] || return 0
  kill "$manager" "$sidecar" 2>/dev/null || true
  wait "$manager" "$sidecar" 2>/dev/null || true
  manager= sidecar=
}
cleanup() {
  echo "deleting the CRs" >&2
  "$K" delete appservices --all -n "$NS" --wait=false >/dev/null 2>&1 || true
  # Polled: `kubectl wait --for=delete --all` hung here once all were gone.
  for _ in $(seq 180); do
    [ "$("$K" get appservices -n "$NS" --no-headers 2>/dev/null | wc -l)" = 0 ] && break
    sleep 5
  done
  stop
  "$K" delete namespace "$NS" --wait=true --timeout=10m >/dev/null 2>&1 || true
}
trap cleanup EXIT

rss() {
  awk -v p="$1" '/^(VmRSS|VmHWM|RssAnon|RssFile|Pss):/ {v[$1]=$2}
    END {print p "\t" v["VmRSS:"] "\t" v["VmHWM:"] "\t" v["RssAnon:"] "\t" v["RssFile:"] "\t" v["Pss:"]}' \
    "/proc/$2/status" "/proc/$2/smaps_rollup"
}
measure() {
  local out=$1
  {
    printf 'process\tVmRSS_KiB\tVmHWM_KiB\tRssAnon_KiB\tRssFile_KiB\tPss_KiB\n'
    rss manager "$manager"
    rss sidecar "$sidecar"
  } | tee "$out/rss.tsv"
  for p in manager:16060 sidecar:16061; do
    curl -sf "http://127.0.0.1:${p#*:}/debug/pprof/heap?gc=1" -o "$out/${p%%:*}-heap.pb.gz"
    curl -sf "http://127.0.0.1:${p#*:}/debug/pprof/heap?debug=1" | sed -n '/^# runtime.MemStats/,$p' >"$out/${p%%:*}-memstats.txt"
  done
  echo "written to $out" >&2
}

first=1
for variant in "$@"; do
  IFS=: read -r -a parts <<<"$variant"
  label=${parts[0]} bin=${parts[1]:-$ROOT/bin}
  out=$OUTROOT/$label
  mkdir -p "$out"
  stop
  if [ "${DROP_CACHES:-}" = 1 ]; then
    # Every variant's binary read from disk afresh, so that how much of it is mapped does not
    # depend on how the page cache came to hold it
    # (docs/bench/findings.md, "Page cache and RSS").
    sync && echo 3 >/proc/sys/vm/drop_caches
  fi
  echo "$label: $bin ${parts[*]:2}" >&2
  start "$bin" "$out" "${parts[@]:2}"
  if [ "$first" = 1 ]; then
    sleep 5
    echo "creating $N AppServices" >&2
    t0=$(date +%s)
    for i in $(seq 0 $((N - 1))); do
      printf 'apiVersion: appcontroller.k8s.io/v1alpha1\nkind: AppService\nmetadata:\n  name: app-%04d\n  namespace: %s\nspec:\n  deploymentName: app-%04d\n  replicas: %d\n---\n' "$i" "$NS" "$i" "$REPLICAS"
    done | "$K" create -f - >/dev/null
    "$K" wait --for=condition=Ready appservices --all -n "$NS" --timeout=30m >/dev/null
    echo "all Ready after $(($(date +%s) - t0)) s; idle ${IDLE} s" >&2
    sleep "$IDLE"
    first=0
  else
    sleep "$WINDOW"
  fi
  measure "$out"
done
