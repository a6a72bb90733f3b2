#!/usr/bin/env bash
# make run: the manager (the helm-operator) and the sidecar against $KUBECONFIG, as the pod runs
# them. Ctrl-C (or SIGTERM) stops both; if one exits, the other is stopped too.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${LOCALBIN:-$ROOT/bin}
: "${KUBECONFIG:?set KUBECONFIG, or make cluster-up for the local cluster}"
export KUBECONFIG
cd "$ROOT" # watches.yaml names the charts relative to the repository root

# Leader election as in the pod, with the deployed operator's Lease and signing key: a
# `make run` against a cluster where the operator is deployed waits as a standby instead of
# racing the deployed manager on every release.
NAMESPACE=${NAMESPACE:-warpdrive-operator-system}
"$BIN/kubectl" get namespace "$NAMESPACE" >/dev/null 2>&1 || "$BIN/kubectl" create namespace "$NAMESPACE" >/dev/null

# The containers' arguments come from the Deployment of config/default, as the test suites'
# do (internal/podargs): only the watches file, the addresses and the Lease's namespace are
# the host's. Loopback ports, so that nothing else on the machine can reach them.
podargs() {
  go run ./hack/podargs -kustomize="$BIN/kustomize" -leader-election-namespace="$NAMESPACE" "$@"
}
manager_args=$(podargs -container=manager \
  -metrics-bind-address="${METRICS_ADDR:-127.0.0.1:8080}" -health-probe-bind-address="${PROBE_ADDR:-127.0.0.1:8081}") || exit
sidecar_args=$(podargs -container=sidecar \
  -metrics-bind-address="${SIDECAR_METRICS_ADDR:-127.0.0.1:8082}" -health-probe-bind-address="${SIDECAR_PROBE_ADDR:-127.0.0.1:8083}") || exit
mapfile -t manager_args <<<"$manager_args"
mapfile -t sidecar_args <<<"$sidecar_args"
# The CRD conversion webhook, which the pod serves behind its Service: the host's sidecar
# serves it on CONVERSION_PORT of every interface, with a certificate for the Service's DNS
# names made for this run, and hack/hostconversion points the Service (an EndpointSlice) at
# this host and the port, and puts the certificate's CA into the caBundle of the served kinds'
# CRDs (internal/hostconversion). Nothing to undo when the run stops or is killed: the next
# run points them at itself again. Against a cluster where the operator is deployed, its
# sidecar serves the webhook and this one serves none.
CONVERSION_PORT=${CONVERSION_PORT:-9443}
cert_dir=$(mktemp -d "${TMPDIR:-/tmp}/warpdrive-run-conversion.XXXXXX") || exit
trap 'rm -rf "$cert_dir"' EXIT
conversion_args=$(go run ./hack/hostconversion -watches-file=watches.yaml -port="$CONVERSION_PORT" -cert-dir="$cert_dir") || exit
[ -n "$conversion_args" ] && mapfile -t -O "${#sidecar_args[@]}" sidecar_args <<<"$conversion_args"

# And the variables the kubelet gives each container from its resources (MEMORY_LIMIT, from
# which each process sets the Go runtime's soft memory limit).
manager_env=$(podargs -container=manager -env) || exit
sidecar_env=$(podargs -container=sidecar -env) || exit
mapfile -t manager_env <<<"$manager_env"
mapfile -t sidecar_env <<<"$sidecar_env"

# Further arguments go to the manager, after the pod's (the last of a flag wins).
env "${manager_env[@]}" "$BIN/manager" "${manager_args[@]}" "$@" &
operator=$!
env "${sidecar_env[@]}" "$BIN/manager" "${sidecar_args[@]}" &
sidecar=$!

stop() { kill "$operator" "$sidecar" 2>/dev/null; wait "$operator" "$sidecar" 2>/dev/null; }
trap 'stop; exit 143' TERM
trap 'stop; exit 130' INT
wait -n "$operator" "$sidecar"
status=$?
echo "run: a process exited ($status); stopping the other" >&2
stop
exit "$status"
