#!/usr/bin/env bash
# make demo: on a bare machine, start the local cluster, install the CRDs, run the operator,
# apply the samples and show them converge. The cluster stays up afterwards
# (make cluster-down removes it); the operator stops with the demo (make run restarts it).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export CLUSTER_DIR=${CLUSTER_DIR:-$ROOT/.cluster}
export KUBECONFIG=$CLUSTER_DIR/kubeconfig
kubectl() { "$ROOT/bin/kubectl" "$@"; }
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "building the operator and the local cluster's binaries (cached after the first run)"
make -s build tools
step "starting the local cluster"
make -s cluster-up
step "installing the CRDs"
kubectl apply --server-side -f config/crd/bases
kubectl wait --for=condition=Established crd --all --timeout=60s >/dev/null

step "running the operator (helm-operator + sidecar), logs in $CLUSTER_DIR/logs/demo-operator.log"
mkdir -p "$CLUSTER_DIR/logs"
hack/run.sh >"$CLUSTER_DIR/logs/demo-operator.log" 2>&1 &
operator=$!
trap 'kill $operator 2>/dev/null; wait $operator 2>/dev/null || true' EXIT

step "applying the samples (config/samples)"
kubectl apply -k config/samples
kinds=$(kubectl kustomize config/samples | awk '/^kind:/ {print tolower($2)}' | sort -u | paste -sd, -)
kubectl wait --for=condition=Deployed "$kinds" --all --timeout=180s

step "each sample is a Helm release; its workload becomes available on kwok's fake nodes"
kubectl wait --for=condition=Available deployment --all --timeout=180s
kubectl rollout status statefulset --timeout=180s -l app.kubernetes.io/managed-by=Helm
for kind in ${kinds//,/ }; do kubectl get "$kind"; echo; done
kubectl get deployments,statefulsets,services,configmaps,poddisruptionbudgets -l app.kubernetes.io/managed-by=Helm
kubectl get storageclasses -l app.kubernetes.io/managed-by=Helm
kubectl get secrets -l owner=helm

step "a spec edit is a Helm upgrade: scaling the Memcached sample from 3 to 4"
kubectl patch memcached memcached-sample --type=merge -p '{"spec":{"size":4}}'
kubectl wait --for=jsonpath='{.status.availableReplicas}'=4 deployment/memcached-sample --timeout=120s
kubectl get secrets -l owner=helm,name=memcached-sample
kubectl get deployment memcached-sample

printf '\nThe cluster is still up: export KUBECONFIG=%s\n' "$KUBECONFIG"
printf 'make run   restarts the operator against it; make cluster-down removes it.\n'
