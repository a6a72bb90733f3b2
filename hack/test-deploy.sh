#!/usr/bin/env bash
# make test-deploy: the deploy e2e, on the cluster of $KUBECONFIG.
#
# The test applies the deploy manifests as a user would, and then runs bin/manager and
# its sidecar locally with a kubeconfig that impersonates the pod's ServiceAccount: the
# operator has exactly the RBAC of config/rbac. The pod itself runs only on the local
# cluster's real node (make node-up image-load; step 3).
#
#  1. make deploy: config/default (namespace, CRDs, RBAC, the manager Deployment and Service);
#  2. the whole e2e suite (test/e2e) with the binaries running as the ServiceAccount;
#  3. test/deploy: the manager pod admitted by the restricted namespace, what the
#     ServiceAccount may not do, then make undeploy with the operator running and with it
#     gone, and nothing left behind either time; with WARPDRIVE_DEPLOY_POD=1 (make test sets
#     it after make node-up image-load), also the operator's real pod on the local cluster's
#     real node (test/deploy/pod_test.go: make deploy DEPLOY_CONFIG=config/local).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
: "${KUBECONFIG:?set KUBECONFIG, or make cluster-up for the local cluster}"
GO_TEST_FLAGS=${GO_TEST_FLAGS:--count=1}
export WARPDRIVE_KUBECONFIG=$KUBECONFIG
export WARPDRIVE_E2E_IMPERSONATE=warpdrive-operator-system/warpdrive-operator-controller-manager

trap 'echo "test-deploy: failed; what make deploy applied may still be there (make undeploy removes it)" >&2' ERR

make -s deploy KUBECONFIG="$KUBECONFIG"
# shellcheck disable=SC2086 # GO_TEST_FLAGS is a list of flags
go test $GO_TEST_FLAGS -timeout 40m -v ./test/e2e/
# shellcheck disable=SC2086
go test $GO_TEST_FLAGS -timeout 20m -v ./test/deploy/
