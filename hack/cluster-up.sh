#!/usr/bin/env bash
# Starts the local test cluster: etcd, kube-apiserver (RBAC on), kube-controller-manager,
# kube-scheduler and kwok with fake nodes, all from bin/ (make tools). Idempotent: when the
# cluster in $CLUSTER_DIR already answers, it does nothing.
#
# State, certificates, logs and the admin kubeconfig live in $CLUSTER_DIR.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${LOCALBIN:-$ROOT/bin}
CLUSTER_DIR=${CLUSTER_DIR:-$ROOT/.cluster}
# Ports: override when several clusters share a machine.
ETCD_PORT=${ETCD_PORT:-23790}
APISERVER_PORT=${APISERVER_PORT:-16443}
CM_PORT=${CM_PORT:-16444}
SCHED_PORT=${SCHED_PORT:-16445}
KWOK_NODES=${KWOK_NODES:-3}
# A /16: thousands of Services fit (a /24 fills up at 254).
SERVICE_CIDR=${SERVICE_CIDR:-10.96.0.0/16}
# kube-controller-manager's client rate, per controller: upstream's defaults, which a wave of
# a hundred upgrades waits on (its Deployment controller writes each Deployment's new
# ReplicaSet and status); docs/bench/valuesfrom.md measures it raised as well.
KCM_API_QPS=${KCM_API_QPS:-20}
KCM_API_BURST=${KCM_API_BURST:-30}

KUBECONFIG_FILE=$CLUSTER_DIR/kubeconfig
PKI=$CLUSTER_DIR/pki
LOGS=$CLUSTER_DIR/logs
kubectl() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" "$@"; }

if [[ -f $KUBECONFIG_FILE ]] && kubectl get --raw /readyz >/dev/null 2>&1; then
  echo "cluster already running: $KUBECONFIG_FILE"
  exit 0
fi
# Leftovers of a cluster that is gone (killed, machine restarted): start clean.
"$ROOT/hack/cluster-down.sh" >/dev/null 2>&1 || true
mkdir -p "$PKI" "$LOGS" "$CLUSTER_DIR/pids"
for port in "$ETCD_PORT" "$((ETCD_PORT + 10))" "$APISERVER_PORT" "$CM_PORT" "$SCHED_PORT"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "port $port is in use (another local cluster? set ETCD_PORT, APISERVER_PORT, CM_PORT, SCHED_PORT)" >&2
    exit 1
  fi
done

# --- certificates: a CA, the apiserver's serving cert, an admin client cert, SA keys.
openssl_quiet() { openssl "$@" >/dev/null 2>&1; }
openssl_quiet req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=warpdrive-local-ca" \
  -keyout "$PKI/ca.key" -out "$PKI/ca.crt"
issue() { # name subject [extfile]
  openssl_quiet req -newkey rsa:2048 -nodes -subj "$2" -keyout "$PKI/$1.key" -out "$PKI/$1.csr"
  openssl_quiet x509 -req -in "$PKI/$1.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3650 -out "$PKI/$1.crt" ${3:+-extfile "$3"}
}
cat >"$PKI/serving.ext" <<EXT
subjectAltName=IP:127.0.0.1,IP:${SERVICE_CIDR%.0/*}.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc
extendedKeyUsage=serverAuth
EXT
printf 'extendedKeyUsage=clientAuth\n' >"$PKI/client.ext"
issue apiserver "/CN=kube-apiserver" "$PKI/serving.ext"
# The admin is in system:masters; the control-plane components use it too (this is a
# throwaway test cluster), while controllers use their own service-account credentials.
issue admin "/O=system:masters/CN=warpdrive-admin" "$PKI/client.ext"
openssl_quiet genrsa -out "$PKI/sa.key" 2048
openssl_quiet rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub"

server=https://127.0.0.1:$APISERVER_PORT
cat >"$KUBECONFIG_FILE" <<KC
apiVersion: v1
kind: Config
clusters:
- name: warpdrive-local
  cluster:
    server: $server
    certificate-authority: $PKI/ca.crt
users:
- name: admin
  user:
    client-certificate: $PKI/admin.crt
    client-key: $PKI/admin.key
contexts:
- name: warpdrive-local
  context: {cluster: warpdrive-local, user: admin}
current-context: warpdrive-local
KC

start() { # name args...
  local name=$1; shift
  nohup "$@" >"$LOGS/$name.log" 2>&1 &
  echo $! >"$CLUSTER_DIR/pids/$name"
}
wait_for() { # what seconds command...
  local what=$1 secs=$2; shift 2
  for ((i = 0; i < secs * 5; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  echo "timed out waiting for $what; logs in $LOGS" >&2
  exit 1
}

# etcd without fsync: a test cluster that is thrown away trades durability for speed.
start etcd "$BIN/etcd" --name=local --data-dir="$CLUSTER_DIR/etcd" \
  --listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls="http://127.0.0.1:$((ETCD_PORT + 10))" \
  --initial-advertise-peer-urls="http://127.0.0.1:$((ETCD_PORT + 10))" \
  --initial-cluster="local=http://127.0.0.1:$((ETCD_PORT + 10))" \
  --unsafe-no-fsync --quota-backend-bytes=8589934592 --log-level=warn
wait_for etcd 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health"

# --endpoint-reconciler-type=none: the loopback advertise address is not allowed in the
# kubernetes Endpoints.
# --enable-aggregator-routing=true: the API server calls a webhook's Service (the operator's
# CRD conversion webhook, config/webhook) at one of its endpoints, a pod IP on the real node's
# bridge that this host reaches, rather than at its cluster IP: this cluster runs no
# kube-proxy, so nothing would answer at a cluster IP. (hack/cluster-restart.sh and
# etcd-snapshot.sh restart it with these same arguments, read from /proc.)
# --feature-gates=StorageVersionMigrator=true and --runtime-config=...v1beta1: the API server
# serves StorageVersionMigrations (beta in 1.35, off by default), which the manager's storage
# migration creates where they are served (internal/storagemigration) instead of its own pass.
start kube-apiserver "$BIN/kube-apiserver" \
  --feature-gates=StorageVersionMigrator=true \
  --runtime-config=storagemigration.k8s.io/v1beta1=true \
  --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$APISERVER_PORT" \
  --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
  --client-ca-file="$PKI/ca.crt" \
  --authorization-mode=Node,RBAC \
  --service-account-issuer=https://kubernetes.default.svc \
  --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
  --service-cluster-ip-range="$SERVICE_CIDR" \
  --endpoint-reconciler-type=none \
  --enable-aggregator-routing=true \
  --allow-privileged=true \
  --max-requests-inflight=800 --max-mutating-requests-inflight=400
wait_for kube-apiserver 90 kubectl get --raw /readyz

# --resource-quota-sync-period: a quota created before the controller-manager discovered a new
# CRD's kind reports "status unknown" for that kind, refusing every create, until its next
# full sync (5 minutes by default); the attack suite's tenants each get such a quota.
# --feature-gates=StorageVersionMigrator=true: its storage-version-migrator-controller runs the
# StorageVersionMigrations. It also needs client-go's InformerResourceVersion and
# InOrderInformers gates (set with KUBE_FEATURE_<gate>=true), which client-go 0.35 has on by
# default (GA and beta), so no environment is set for them.
start kube-controller-manager "$BIN/kube-controller-manager" \
  --feature-gates=StorageVersionMigrator=true \
  --kubeconfig="$KUBECONFIG_FILE" \
  --resource-quota-sync-period=20s \
  --kube-api-qps="$KCM_API_QPS" --kube-api-burst="$KCM_API_BURST" \
  --authentication-kubeconfig="$KUBECONFIG_FILE" --authorization-kubeconfig="$KUBECONFIG_FILE" \
  --bind-address=127.0.0.1 --secure-port="$CM_PORT" \
  --leader-elect=false --use-service-account-credentials \
  --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
  --service-cluster-ip-range="$SERVICE_CIDR" \
  --controllers='*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-route'
start kube-scheduler "$BIN/kube-scheduler" \
  --kubeconfig="$KUBECONFIG_FILE" \
  --authentication-kubeconfig="$KUBECONFIG_FILE" --authorization-kubeconfig="$KUBECONFIG_FILE" \
  --bind-address=127.0.0.1 --secure-port="$SCHED_PORT" --leader-elect=false

# kwok manages only the nodes annotated for it; it renews their leases itself.
start kwok "$BIN/kwok" --kubeconfig="$KUBECONFIG_FILE" \
  --config="$ROOT/hack/kwok/stages.yaml" \
  --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
  --node-lease-duration-seconds=40 --cidr=10.0.0.0/16 --node-ip=10.1.0.1 \
  --server-address=127.0.0.1:0

for ((n = 0; n < KWOK_NODES; n++)); do
  kubectl apply -f - >/dev/null <<NODE
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$n
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/hostname: kwok-node-$n
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    node-role.kubernetes.io/agent: ""
    type: kwok
spec: {}
NODE
done
wait_for "kwok nodes Ready" 60 kubectl wait --for=condition=Ready node --all --timeout=1s
# Pods need the default ServiceAccount, which the controller-manager creates.
wait_for "default ServiceAccount" 60 kubectl get serviceaccount default -n default
echo "cluster up: export KUBECONFIG=$KUBECONFIG_FILE"
