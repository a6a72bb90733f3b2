#!/usr/bin/env bash
# The manager's CPU, RSS and profiles through a wave of creates and a wave of deletes of N
# AppService CRs (docs/bench/memory.md, "The rollout's plans"):
#
#   hack/wave-profile.sh N        OUT (default .cluster/wave-profile) receives the figures
#
# Runs bin/manager and bin/sidecar against $KUBECONFIG with the arguments of config/default's
# Deployment (as make run does) plus pprof on loopback; creates N AppServices in the
# namespace wave-profile and waits until all are Ready; deletes them and waits until they and
# their Deployments and Services are gone. Writes to OUT:
#   summary            wall time and the manager's CPU-s of each wave, RSS (MiB) after creating
#   allocs0/1.pb.gz    allocation profiles before and after the creates
#                      (go tool pprof -sample_index=alloc_space -base allocs0.pb.gz allocs1.pb.gz)
#   create-cpu.pb.gz   a 40 s CPU profile from the start of the creates
#   delete-cpu.pb.gz   a 30 s CPU profile from the start of the deletes
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
: "${KUBECONFIG:?set KUBECONFIG (the local cluster: .cluster/kubeconfig)}"
export KUBECONFIG
N=${1:?usage: hack/wave-profile.sh N}
OUT=${OUT:-$ROOT/.cluster/wave-profile}
NS=wave-profile LEASE_NS=warpdrive-operator-system K=$ROOT/bin/kubectl
cd "$ROOT"
mkdir -p "$OUT"
"$K" apply --server-side --force-conflicts -f config/crd/bases >/dev/null
"$K" get namespace "$LEASE_NS" >/dev/null 2>&1 || "$K" create namespace "$LEASE_NS" >/dev/null
"$K" create namespace "$NS" >/dev/null
podargs() { go run ./hack/podargs -kustomize=bin/kustomize -leader-election-namespace="$LEASE_NS" -container="$1"; }
mapfile -t margs < <(podargs manager)
mapfile -t sargs < <(podargs sidecar)
bin/manager "${margs[@]}" --pprof-bind-address=127.0.0.1:16060 >"$OUT/manager.log" 2>&1 &
m=$!
bin/sidecar "${sargs[@]}" --pprof-bind-address=127.0.0.1:16061 >"$OUT/sidecar.log" 2>&1 &
s=$!
trap 'kill $m $s 2>/dev/null || true; "$K" delete namespace $NS --wait=false >/dev/null 2>&1 || true' EXIT
sleep 8
pprof() { curl -sf "http://127.0.0.1:16060/debug/pprof/$1" -o "$OUT/$2"; }
cpu() { awk '{print ($14 + $15) / 100}' "/proc/$m/stat"; }
rss() { awk '/^(VmRSS|VmHWM|RssAnon|RssFile):/ {printf "%s %d ", $1, $2 / 1024} END {print ""}' "/proc/$1/status"; }
since() { echo "$(date +%s.%N) - $1" | bc; }

pprof allocs allocs0.pb.gz
t0=$(date +%s.%N) c0=$(cpu)
for i in $(seq 0 $((N - 1))); do
  printf 'apiVersion: appcontroller.k8s.io/v1alpha1\nkind: AppService\nmetadata:\n  name: app-%04d\n  namespace: %s\nspec:\n  deploymentName: app-%04d\n  replicas: 2\n---\n' "$i" "$NS" "$i"
done | "$K" create -f - >/dev/null
pprof "profile?seconds=40" create-cpu.pb.gz &
p=$!
"$K" wait --for=condition=Ready appservices --all -n "$NS" --timeout=30m >/dev/null
echo "create: all Ready after $(since "$t0") s, manager CPU $(echo "$(cpu) - $c0" | bc) s" | tee "$OUT/summary"
wait "$p"
pprof allocs allocs1.pb.gz
echo "manager: $(rss $m)" | tee -a "$OUT/summary"
echo "sidecar: $(rss $s)" | tee -a "$OUT/summary"

t0=$(date +%s.%N) c0=$(cpu)
"$K" delete appservices --all -n "$NS" --wait=false >/dev/null
pprof "profile?seconds=30" delete-cpu.pb.gz &
p=$!
while [ "$("$K" get appservices -n "$NS" --no-headers 2>/dev/null | wc -l)" != 0 ]; do sleep 1; done
while [ "$("$K" get deployments,services -n "$NS" --no-headers 2>/dev/null | wc -l)" != 0 ]; do sleep 1; done
echo "delete: all gone after $(since "$t0") s, manager CPU $(echo "$(cpu) - $c0" | bc) s" | tee -a "$OUT/summary"
wait "$p"
