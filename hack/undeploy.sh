#!/usr/bin/env bash
# make undeploy: removes everything make deploy applied (config/default), custom resources
# first.
#
# Deleting a CRD deletes its CRs, but a CR's Helm release is uninstalled only by the running
# helm-operator, in the CR's finalizer; without it, a pool's StorageClass (cluster-scoped, so
# no owner reference collects it) would stay behind, and a CR whose operator is gone would
# keep its CRD, and so undeploy, waiting forever. So:
#
#  1. delete every CR of the operator's kinds in every namespace, and wait up to
#     $UNDEPLOY_TIMEOUT seconds for the operator to uninstall their releases;
#  2. if some are still there, the operator is gone (or cannot uninstall): remove their
#     finalizers, and delete the StorageClasses of their releases (the one cluster-scoped kind
#     the charts render; their namespaced objects and release Secrets carry owner references
#     to the CR and are garbage-collected);
#  3. delete the rest of config/default: the operator's Deployment, RBAC, namespace, CRDs,
#     waiting up to $UNDEPLOY_DELETE_TIMEOUT for them to go.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${LOCALBIN:-$ROOT/bin}
KUBECTL=${KUBECTL:-$BIN/kubectl}
KUSTOMIZE=${KUSTOMIZE:-$BIN/kustomize}
TIMEOUT=${UNDEPLOY_TIMEOUT:-120}
DELETE_TIMEOUT=${UNDEPLOY_DELETE_TIMEOUT:-300}
: "${KUBECONFIG:?set KUBECONFIG, or make cluster-up for the local cluster}"
export KUBECONFIG
kubectl() { "$KUBECTL" "$@"; }

# The CR kinds are the CRDs of config/crd (which config/default includes) that the cluster has.
types=$("$KUSTOMIZE" build "$ROOT/config/crd" | kubectl get -f - --ignore-not-found -o name |
  sed 's|^customresourcedefinition.apiextensions.k8s.io/||' | paste -sd, -)

remaining() { kubectl get "$types" --all-namespaces -o name 2>/dev/null | wc -l; }

if [[ -n $types ]]; then
  echo "undeploy: deleting the custom resources ($types); the operator uninstalls their releases"
  kubectl delete "$types" --all --all-namespaces --wait=false --ignore-not-found >/dev/null
  deadline=$((SECONDS + TIMEOUT))
  while (($(remaining) > 0 && SECONDS < deadline)); do sleep 1; done

  if (($(remaining) > 0)); then
    echo "undeploy: $(remaining) custom resources still there after ${TIMEOUT}s: the operator is gone or" \
      "cannot uninstall them; removing their finalizers (their releases are not uninstalled)" >&2
    for type in ${types//,/ }; do
      kubectl get "$type" --all-namespaces -o jsonpath='{range .items[*]}{.metadata.namespace}{" "}{.metadata.name}{"\n"}{end}' |
        while read -r ns name; do
          kubectl patch "$type" "$name" -n "$ns" --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null
          echo "undeploy:   finalizers removed: $type $ns/$name" >&2
          # What the uninstall would have deleted and no owner reference collects: the
          # StorageClasses of release $ns/$name (the charts label everything with the
          # release name, Helm annotates it with the release namespace).
          kubectl get storageclass -l "app.kubernetes.io/instance=$name" -o jsonpath="{range .items[?(@.metadata.annotations.meta\.helm\.sh/release-namespace==\"$ns\")]}{.metadata.name}{\"\\n\"}{end}" |
            while read -r sc; do kubectl delete storageclass "$sc" --ignore-not-found; done
        done
    done
  fi
fi

echo "undeploy: deleting config/default"
"$KUSTOMIZE" build "$ROOT/config/default" |
  kubectl delete --ignore-not-found --timeout="${DELETE_TIMEOUT}s" -f -
