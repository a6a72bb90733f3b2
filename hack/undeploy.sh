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
#  2. if some are still there, the operator is gone (or cannot uninstall): delete them again
#     with foreground propagation, remove the operator's finalizer, and delete the
#     StorageClasses of their releases (the one cluster-scoped kind the charts render). Their
#     namespaced objects and release Secrets carry owner references (blockOwnerDeletion) to
#     the CR, so with foreground propagation the garbage collector deletes them first and the
#     CR goes last; we wait for that. Deleting the CRDs any earlier would strand them: the
#     garbage collector cannot resolve an owner whose kind is gone, and keeps such
#     dependents for ever;
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

# drop_finalizers TYPE NS NAME removes every finalizer but the garbage collector's
# (foregroundDeletion, orphan) from one CR, one at a time by index, each removal guarded by a
# test of the value: the garbage collector may change the list between our read and our patch.
drop_finalizers() {
  local type=$1 ns=$2 name=$3 i f
  for _ in $(seq 20); do
    i=0
    while read -r f; do
      [[ -z $f || $f == foregroundDeletion || $f == orphan ]] || break
      i=$((i + 1))
    done < <(kubectl get "$type" "$name" -n "$ns" --ignore-not-found -o jsonpath='{range .metadata.finalizers[*]}{@}{"\n"}{end}')
    [[ -n ${f:-} && $f != foregroundDeletion && $f != orphan ]] || return 0
    kubectl patch "$type" "$name" -n "$ns" --type=json \
      -p "[{\"op\":\"test\",\"path\":\"/metadata/finalizers/$i\",\"value\":\"$f\"},{\"op\":\"remove\",\"path\":\"/metadata/finalizers/$i\"}]" \
      >/dev/null 2>&1 || true
    f=
  done
  echo "undeploy: could not remove the finalizers of $type $ns/$name" >&2
  return 1
}

if [[ -n $types ]]; then
  echo "undeploy: deleting the custom resources ($types); the operator uninstalls their releases"
  kubectl delete "$types" --all --all-namespaces --wait=false --ignore-not-found >/dev/null
  deadline=$((SECONDS + TIMEOUT))
  while (($(remaining) > 0 && SECONDS < deadline)); do sleep 1; done

  if (($(remaining) > 0)); then
    echo "undeploy: $(remaining) custom resources still there after ${TIMEOUT}s: the operator is gone or" \
      "cannot uninstall them; removing their finalizers (their releases are not uninstalled)" >&2
    kubectl delete "$types" --all --all-namespaces --cascade=foreground --wait=false --ignore-not-found >/dev/null
    for type in ${types//,/ }; do
      kubectl get "$type" --all-namespaces -o jsonpath='{range .items[*]}{.metadata.namespace}{" "}{.metadata.name}{"\n"}{end}' |
        while read -r ns name; do
          if drop_finalizers "$type" "$ns" "$name"; then
            echo "undeploy:   finalizers removed: $type $ns/$name" >&2
          fi
          # What the uninstall would have deleted and no owner reference collects: the
          # StorageClasses of release $ns/$name (the charts label everything with the
          # release name, Helm annotates it with the release namespace).
          kubectl get storageclass -l "app.kubernetes.io/instance=$name" -o jsonpath="{range .items[?(@.metadata.annotations.meta\.helm\.sh/release-namespace==\"$ns\")]}{.metadata.name}{\"\\n\"}{end}" |
            while read -r sc; do kubectl delete storageclass "$sc" --ignore-not-found; done
        done
    done
    echo "undeploy: waiting up to ${DELETE_TIMEOUT}s for the garbage collector to delete what they own"
    deadline=$((SECONDS + DELETE_TIMEOUT))
    while (($(remaining) > 0 && SECONDS < deadline)); do sleep 1; done
    if (($(remaining) > 0)); then
      echo "undeploy: $(remaining) custom resources still wait for their dependents; deleting their CRDs" \
        "may leave those dependents behind" >&2
    fi
  fi
fi

echo "undeploy: deleting config/default"
"$KUSTOMIZE" build "$ROOT/config/default" |
  kubectl delete --ignore-not-found --timeout="${DELETE_TIMEOUT}s" -f -
