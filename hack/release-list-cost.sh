#!/usr/bin/env bash
# What a LIST of one release's records costs the API server against GETs of them by name, as
# the namespace fills with release Secrets (internal/releaserecords, docs/bench/delete.md):
#
#   hack/release-list-cost.sh SECRETS [REQUESTS]
#
# Creates the namespace release-list-cost with SECRETS Secrets shaped like Helm's records
# (labels owner=helm, name=r<i>, status, version; 10 KB of data), then makes REQUESTS
# (default 1000) LISTs by the labels name=r<i>,owner=helm, as Helm's Secrets driver does, and
# REQUESTS GETs of sh.helm.release.v1.r<i>.v1 with as many of the missing .v2 (the look for a
# newer record). Prints the CPU that kube-apiserver and etcd spent on each kind, from /proc,
# so run it on the local cluster with nothing else running. Deletes the namespace at the end.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
: "${KUBECONFIG:?set KUBECONFIG (the local cluster: .cluster/kubeconfig)}"
SECRETS=${1:?usage: hack/release-list-cost.sh SECRETS [REQUESTS]}
REQUESTS=${2:-1000}
NS=release-list-cost K=$ROOT/bin/kubectl TMP=$(mktemp -d)
trap 'rm -rf "$TMP"; "$K" delete namespace "$NS" --wait=false >/dev/null 2>&1 || true' EXIT

cfg() { "$K" config view --raw --minify -o jsonpath="{$1}"; }
SERVER=$(cfg .clusters[0].cluster.server)
CA=$(cfg .clusters[0].cluster.certificate-authority)
CERT=$(cfg .users[0].user.client-certificate)
KEY=$(cfg .users[0].user.client-key)

"$K" create namespace "$NS" >/dev/null
python3 - "$SECRETS" "$TMP" <<'EOF'
import base64, json, os, sys
n, tmp = int(sys.argv[1]), sys.argv[2]
data = base64.b64encode(os.urandom(7500)).decode()
for start in range(0, n, 5000):
    items = [{"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
              "metadata": {"name": "sh.helm.release.v1.r%d.v1" % i,
                           "labels": {"owner": "helm", "name": "r%d" % i, "status": "deployed", "version": "1"}},
              "data": {"release": data}} for i in range(start, min(n, start + 5000))]
    with open("%s/secrets-%d.json" % (tmp, start), "w") as f:
        json.dump({"apiVersion": "v1", "kind": "List", "items": items}, f)
EOF
for f in "$TMP"/secrets-*.json; do "$K" create -n "$NS" -f "$f" >/dev/null; done

base="$SERVER/api/v1/namespaces/$NS/secrets"
for ((i = 0; i < REQUESTS; i++)); do
  r=$((i % SECRETS))
  printf 'url = "%s?labelSelector=name%%3Dr%d%%2Cowner%%3Dhelm"\noutput = "/dev/null"\n' "$base" "$r" >>"$TMP/lists"
  printf 'url = "%s/sh.helm.release.v1.r%d.v1"\noutput = "/dev/null"\n' "$base" "$r" >>"$TMP/gets"
  printf 'url = "%s/sh.helm.release.v1.r%d.v2"\noutput = "/dev/null"\n' "$base" "$r" >>"$TMP/gets"
done

# CPU ticks (1/100 s) of a process, by its command's start.
ticks() { awk '{print $14 + $15}' "/proc/$(pgrep -f "^$ROOT/bin/$1 " | head -1)/stat"; }
for kind in lists gets; do
  a0=$(ticks kube-apiserver) e0=$(ticks etcd)
  curl -s --cacert "$CA" --cert "$CERT" --key "$KEY" -K "$TMP/$kind"
  a1=$(ticks kube-apiserver) e1=$(ticks etcd)
  n=$REQUESTS; [[ $kind == gets ]] && n=$((2 * REQUESTS))
  awk -v k="$kind" -v n="$n" -v s="$SECRETS" -v a=$((a1 - a0)) -v e=$((e1 - e0)) 'BEGIN {
    printf "%d %s in a namespace of %d release Secrets: kube-apiserver %.2f ms, etcd %.2f ms each\n", n, k, s, a * 10 / n, e * 10 / n }'
done
