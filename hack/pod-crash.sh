#!/usr/bin/env bash
# A crash of the operator's pod over the CRs already in the cluster: how long an edit made as
# the leader's processes are killed takes to be Ready, with REPLICAS pods
# (docs/bench/restart-10000/fairness.md, "A crash with a standby"):
#
#   REPLICAS=2 ROUNDS=2 hack/pod-crash.sh
#
# Needs the real node with the image (make node-up image-load) and no operator running. The
# CRs are those left by an earlier run, for example make bench-fairness's with
# WARPDRIVE_BENCH_FAIRNESS_KEEP=1, whose releases are signed with the key in LEASE_NS
# (default default, as the benchmarks run): the script copies that key into the operator's
# namespace before make deploy DEPLOY_CONFIG=config/local, so that the pod takes the
# releases for its own. Each round waits for every pod of the Deployment to be Ready (its
# cache filled), kills both processes of the leader's pod (SIGKILL through the node's
# containerd), edits the pods' CPU request of the AppService crash-b/b at once, and prints
# the seconds from the kill to the edit's Ready at its generation, and who holds the Leases
# then. The kubelet starts a container killed again within 10 minutes only after a back-off
# (10 s, then doubling), so ROUNDS above REPLICAS measures that back-off as well. After each
# round it prints, from the logs of the new holder's processes, when each took its Lease, when
# the manager loaded the signing keys and upgraded B's release; from the restarted processes'
# logs, when each put off filling its cache (internal/handover, DeferredCache); and the Events
# of the Leases since the kill: who handed them over, or took them.
#
# FREEZE=1 freezes the leader's processes instead of killing them (containerd pauses them), as
# on a node cut off from the API server: they neither renew their Leases nor end, so that the
# standby takes over when the Leases expire. They are thawed once the edit is Ready, find their
# Leases lost and exit, and the next round waits for their restart. "After the kill" then
# means after the freeze.
#
# EDIT_AFTER=<seconds> makes the edit that long after the kill instead of at once, for example
# while the restarted processes fill their caches; the round then also prints the seconds from
# the edit to its Ready.
#
# ROLLOUT=1 rolls the Deployment (kubectl rollout restart, as an upgrade of the operator does)
# instead of killing the leader's processes, and edits B every 10 s until the rollout is done,
# each edit once the last one is Ready; each line is one edit: when it was made after the
# restart, its seconds to Ready, and who held the Leases then, followed by when, after the
# restart, the holders took their Leases and the manager last upgraded B's release.
#
# The processes log times to the nanosecond (a change of the pod template, so a rollout, the
# first time). PROFILE=<dir> also serves pprof from both processes of every pod and, in each
# round, takes a CPU profile of the standby's manager from just before the kill,
# PROFILE_SECONDS long (default 15), into <dir>/round-<n>.pprof.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
: "${KUBECONFIG:?set KUBECONFIG (the local cluster: .cluster/kubeconfig)}"
export KUBECONFIG
REPLICAS=${REPLICAS:-2} ROUNDS=${ROUNDS:-$REPLICAS} LEASE_NS=${LEASE_NS:-default} FREEZE=${FREEZE:-}
EDIT_AFTER=${EDIT_AFTER:-0} ROLLOUT=${ROLLOUT:-}
how=killed origin=kill
[ -n "$ROLLOUT" ] && origin=restart
[ -n "$FREEZE" ] && how=frozen
PROFILE=${PROFILE:-} PROFILE_SECONDS=${PROFILE_SECONDS:-15}
K=$ROOT/bin/kubectl NS=warpdrive-operator-system DEPLOY=warpdrive-operator-controller-manager
KEY=warpdrive-operator-release-signing-key
CTR=(ctr --address "$ROOT/.cluster/node/containerd.sock" -n k8s.io)
cd "$ROOT"

"$K" get namespace "$NS" >/dev/null 2>&1 || "$K" create namespace "$NS" >/dev/null
if ! "$K" -n "$NS" get secret "$KEY" >/dev/null 2>&1; then
  "$K" -n "$LEASE_NS" get secret "$KEY" -o json |
    jq 'del(.metadata.namespace, .metadata.uid, .metadata.resourceVersion, .metadata.creationTimestamp, .metadata.managedFields)' |
    "$K" -n "$NS" create -f - >/dev/null
fi
# Deployed once: make deploy would set the replicas back to config/local's.
"$K" -n "$NS" get deployment "$DEPLOY" >/dev/null 2>&1 || make -s deploy DEPLOY_CONFIG=config/local >/dev/null
"$K" -n "$NS" scale deployment/"$DEPLOY" --replicas="$REPLICAS" >/dev/null
# add_arg adds the argument $2 to container $1 (its index) of the pod template, unless it is
# there: a rollout.
add_arg() {
  "$K" -n "$NS" get deployment "$DEPLOY" -o json |
    jq -e --arg a "$2" ".spec.template.spec.containers[$1].args | index(\$a)" >/dev/null ||
    "$K" -n "$NS" patch deployment "$DEPLOY" --type=json \
      -p "[{\"op\": \"add\", \"path\": \"/spec/template/spec/containers/$1/args/-\", \"value\": \"$2\"}]" >/dev/null
}
# Log times to the nanosecond (zap's default is to the second), and with PROFILE the
# manager's pprof on :6065, the sidecar's on :6066 (one network namespace per pod).
add_arg 0 --zap-time-encoding=rfc3339nano
add_arg 1 --zap-time-encoding=rfc3339nano
if [ -n "$PROFILE" ]; then
  mkdir -p "$PROFILE"
  add_arg 0 --pprof-bind-address=:6065
  add_arg 1 --pprof-bind-address=:6066
fi
# Pods whose containers never restarted, so that the first REPLICAS rounds meet no back-off.
"$K" -n "$NS" rollout status deployment/"$DEPLOY" --timeout=30m >/dev/null
if [ "$("$K" -n "$NS" get pods -o json | jq '[.items[].status.containerStatuses[]?.restartCount] | add // 0')" != 0 ]; then
  "$K" -n "$NS" rollout restart deployment/"$DEPLOY" >/dev/null
fi

"$K" get namespace crash-b >/dev/null 2>&1 || "$K" create namespace crash-b >/dev/null
"$K" apply -f - >/dev/null <<EOF
apiVersion: appcontroller.k8s.io/v1alpha1
kind: AppService
metadata: {name: b, namespace: crash-b}
spec: {deploymentName: b, replicas: 0}
EOF

# ready_at_generation succeeds once crash-b/b is Ready at its generation.
ready_at_generation() {
  "$K" -n crash-b get appservice b -o json | jq -e \
    '.metadata.generation as $g | .status.observedGeneration == $g and
     any(.status.conditions[]?; .type == "Ready" and .status == "True" and .observedGeneration == $g)' >/dev/null
}
# logged_after prints when container $1 of pod $2 (its name, or name_uid) last logged a line
# matching $3, as seconds after the kill (or the restart: $origin), labelled $4 (nothing if it
# logged none).
logged_after() {
  local line t
  line=$("$K" -n "$NS" logs "${2%_*}" -c "$1" | grep -E "$3" | tail -n 1) || return 0
  if [[ $line == "{"* ]]; then
    t=$(jq -r .ts <<<"$line") # zap's JSON
  else
    # klog's header: I<MMDD> <hh:mm:ss.uuuuuu>
    t=$(awk -v y="$(date -u +%Y)" '{print substr($1, 2, 2) "/" substr($1, 4, 2) "/" y " " $2}' <<<"$line")
  fi
  printf '  %s: %s %.2f s after the %s, by %s\n' "$1" "$4" \
    "$(awk -v a="$killed" -v b="$(date -u -d "$t" +%s.%N)" 'BEGIN{print b - a}')" "$origin" "${2%_*}"
}
# edit_b sets the pods' CPU request of crash-b/b to $cpu millicores.
edit_b() {
  "$K" -n crash-b patch appservice b --type=merge -p "{\"spec\":{\"resources\":{\"requests\":{\"cpu\":\"${cpu}m\"}}}}" >/dev/null
}
# restarts prints how many times the containers of pod $1 have restarted.
restarts() { "$K" -n "$NS" get pod "$1" -o json | jq '[.status.containerStatuses[].restartCount] | add'; }
# holder prints the holder of Lease $1.
holder() { "$K" -n "$NS" get lease "$1" -o jsonpath='{.spec.holderIdentity}'; }

round=0
while [ "$round" -lt "$ROUNDS" ]; do
  "$K" -n "$NS" rollout status deployment/"$DEPLOY" --timeout=30m >/dev/null
  # Every pod Ready, and both Leases held by one of them (not by a pod still stopping).
  while :; do
    mapfile -t ready < <("$K" -n "$NS" get pods -o json | jq -r '.items[] | select(.metadata.deletionTimestamp == null) |
      select(any(.status.conditions[]?; .type == "Ready" and .status == "True")) | .metadata.name + "_" + .metadata.uid')
    m=$(holder warpdrive-operator.transwarp.io) s=$(holder warpdrive-sidecar.transwarp.io)
    if [ "${#ready[@]}" = "$REPLICAS" ] && [[ " ${ready[*]} " == *" $m "* && " ${ready[*]} " == *" $s "* ]]; then
      break
    fi
    sleep 1
  done
  until ready_at_generation; do sleep 1; done
  # A request the edit changes: one millicore more than now.
  cpu=$("$K" -n crash-b get appservice b -o jsonpath='{.spec.resources.requests.cpu}') cpu=${cpu%m}
  cpu=$((${cpu:-100} + 1))
  leader=${m%_*}
  mapfile -t ids < <("$K" -n "$NS" get pod "$leader" -o json |
    jq -r '.status.containerStatuses[] | select(.ready and .state.running) | .containerID | sub("containerd://"; "")')
  [ "${#ids[@]}" = 2 ] || { sleep 1; continue; }
  round=$((round + 1))
  if [ -n "$ROLLOUT" ]; then
    restarted=$(date +%s.%N)
    killed=$restarted # logged_after's origin
    "$K" -n "$NS" rollout restart deployment/"$DEPLOY" >/dev/null
    "$K" -n "$NS" rollout status deployment/"$DEPLOY" --timeout=30m >/dev/null &
    rolling=$!
    while kill -0 "$rolling" 2>/dev/null; do
      edited=$(date +%s.%N)
      edit_b
      until ready_at_generation; do sleep 0.1; done
      ready=$(date +%s.%N)
      printf 'round %d, %d pods, rollout: edit made %.1f s after the restart, Ready %.1f s later; Leases held by %s and %s\n' \
        "$round" "$REPLICAS" "$(awk -v a="$restarted" -v b="$edited" 'BEGIN{print b - a}')" \
        "$(awk -v a="$edited" -v b="$ready" 'BEGIN{print b - a}')" \
        "$(holder warpdrive-operator.transwarp.io)" "$(holder warpdrive-sidecar.transwarp.io)"
      # Times after the restart, from the logs of the Leases' holders.
      m=$(holder warpdrive-operator.transwarp.io) s=$(holder warpdrive-sidecar.transwarp.io)
      logged_after manager "$m" 'Successfully acquired lease' 'Lease taken'
      logged_after manager "$m" '"Release upgraded".*"crash-b"' 'B upgraded'
      logged_after sidecar "$s" 'Successfully acquired lease' 'Lease taken'
      cpu=$((cpu + 1))
      sleep "$(awk -v a="$edited" -v b="$(date +%s.%N)" 'BEGIN{d = 10 - (b - a); print (d > 0 ? d : 0)}')"
    done
    wait "$rolling"
    continue
  fi
  if [ -n "$PROFILE" ]; then
    ip=$("$K" -n "$NS" get pods -o json | jq -r --arg leader "$leader" \
      '[.items[] | select(.metadata.name != $leader and .metadata.deletionTimestamp == null)][0].status.podIP')
    curl -sf "http://$ip:6065/debug/pprof/profile?seconds=$PROFILE_SECONDS" -o "$PROFILE/round-$round.pprof" &
    sleep 0.5
  fi
  since=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  if [ -n "$FREEZE" ]; then
    before=$(restarts "$leader")
    for id in "${ids[@]}"; do "${CTR[@]}" tasks pause "$id"; done
  else
    for id in "${ids[@]}"; do "${CTR[@]}" tasks kill --signal SIGKILL "$id" >/dev/null; done
  fi
  killed=$(date +%s.%N)
  [ "$EDIT_AFTER" = 0 ] || sleep "$EDIT_AFTER"
  edited=$(date +%s.%N)
  edit_b
  until ready_at_generation; do sleep 0.1; done
  ready=$(date +%s.%N)
  if [ -n "$FREEZE" ]; then
    for id in "${ids[@]}"; do "${CTR[@]}" tasks resume "$id"; done
    # Until both have exited (their pod still looks Ready until then), at most 2 minutes.
    for _ in $(seq 120); do [ "$(restarts "$leader")" -ge $((before + 2)) ] && break; sleep 1; done
  fi
  printf 'round %d, %d pods: leader %s %s; the edit Ready %.1f s later' \
    "$round" "$REPLICAS" "$leader" "$how" "$(awk -v a="$killed" -v b="$ready" 'BEGIN{print b - a}')"
  [ "$EDIT_AFTER" = 0 ] || printf ' (made %.1f s after the kill, Ready %.1f s after it)' \
    "$(awk -v a="$killed" -v b="$edited" 'BEGIN{print b - a}')" "$(awk -v a="$edited" -v b="$ready" 'BEGIN{print b - a}')"
  printf '; Leases held by %s and %s\n' "$(holder warpdrive-operator.transwarp.io)" "$(holder warpdrive-sidecar.transwarp.io)"
  m=$(holder warpdrive-operator.transwarp.io) s=$(holder warpdrive-sidecar.transwarp.io)
  logged_after manager "$m" 'Successfully acquired lease' 'Lease taken'
  logged_after manager "$m" 'loaded the release signing keys' 'signing keys loaded'
  logged_after manager "$m" '"Release upgraded".*"crash-b"' 'B upgraded'
  logged_after sidecar "$s" 'Successfully acquired lease' 'Lease taken'
  logged_after manager "$leader" 'filling the cache later' 'cache fill deferred'
  logged_after sidecar "$leader" 'filling the cache later' 'cache fill deferred'
  "$K" -n "$NS" get events -o json | jq -r --arg since "$since" '.items[] |
    select(.involvedObject.kind == "Lease" and (.lastTimestamp // .eventTime) >= $since) |
    "  \(.lastTimestamp // .eventTime) \(.involvedObject.name): \(.message)"'
  wait
done
