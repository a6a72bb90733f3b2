#!/usr/bin/env bash
# make demo-deploy: the operator as users run it, in its pod. Starts the local cluster and its
# real node (hack/node-up.sh), builds the image from the Dockerfile (make image) and loads it
# into the node, runs make deploy with config/local (config/default placed on the real node),
# then applies the samples in namespace $DEMO_NAMESPACE and shows them converge.
# Everything stays up afterwards: make undeploy removes the operator, make node-down the node.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export CLUSTER_DIR=${CLUSTER_DIR:-$ROOT/.cluster}
export KUBECONFIG=$CLUSTER_DIR/kubeconfig
NS=${DEMO_NAMESPACE:-warpdrive-demo}
OPERATOR_NS=warpdrive-operator-system
kubectl() { "$ROOT/bin/kubectl" "$@"; }
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "the local cluster and its real node (binaries cached after the first run)"
make -s tools cluster-up node-up
step "the operator image, built from the Dockerfile without Docker, loaded into the node"
make -s image-load
step "make deploy (config/local: config/default on the real node)"
make -s deploy DEPLOY_CONFIG=config/local
kubectl -n "$OPERATOR_NS" rollout status deployment/warpdrive-operator-controller-manager --timeout=180s
kubectl -n "$OPERATOR_NS" get pods -o wide
step "both containers run from the image as user 65532 with a read-only root filesystem"
kubectl -n "$OPERATOR_NS" get pods -o jsonpath='{range .items[*]}{range .status.containerStatuses[*]}{.name}{": ready="}{.ready}{" restarts="}{.restartCount}{" image="}{.image}{"\n"}{end}{end}'
step "applying the samples in namespace $NS"
kubectl create namespace "$NS" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl apply -k config/samples -n "$NS"
kinds=$(kubectl kustomize config/samples | awk '/^kind:/ {print tolower($2)}' | sort -u | paste -sd, -)
kubectl wait --for=condition=Deployed "$kinds" --all -n "$NS" --timeout=180s
for kind in ${kinds//,/ }; do kubectl get "$kind" -n "$NS"; echo; done
step "the manager's log, from its pod"
kubectl -n "$OPERATOR_NS" logs deployment/warpdrive-operator-controller-manager -c manager --tail=15
printf '\nmake undeploy removes the operator and the samples; make node-down removes the node.\n'
