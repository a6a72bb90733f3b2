#!/usr/bin/env bash
# make run: the helm-operator and the sidecar in the foreground against $KUBECONFIG, as the
# manager pod runs them. Ctrl-C stops both.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${LOCALBIN:-$ROOT/bin}
: "${KUBECONFIG:?set KUBECONFIG, or make cluster-up for the local cluster}"
export KUBECONFIG
cd "$ROOT" # watches.yaml names the charts relative to the repository root

# Ports differ from the pod's defaults only to avoid clashing with anything else running here.
"$BIN/sidecar" --watches-file=watches.yaml \
  --metrics-bind-address="${SIDECAR_METRICS_ADDR:-127.0.0.1:8082}" \
  --health-probe-bind-address="${SIDECAR_PROBE_ADDR:-127.0.0.1:8083}" &
sidecar=$!
trap 'kill $sidecar 2>/dev/null; wait $sidecar 2>/dev/null' EXIT

"$BIN/helm-operator" run --watches-file=watches.yaml \
  --metrics-bind-address="${METRICS_ADDR:-127.0.0.1:8080}" \
  --health-probe-bind-address="${PROBE_ADDR:-127.0.0.1:8081}" "$@"
