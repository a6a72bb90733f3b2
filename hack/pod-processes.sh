# Sourced by the measurement scripts that run the operator's pod as two processes on this
# machine (hack/restart-profile.sh, hack/wave-profile.sh), so that both start them the same
# way.
#
# start_pod OUT starts bin/manager twice, as the pod's manager and as its sidecar, with the
# arguments and environment of config/default's Deployment (hack/podargs, the one source of
# them, as make run uses), the Lease in LEASE_NS, and pprof on loopback: the manager's on
# 127.0.0.1:16060 and its metrics on 16062, the sidecar's pprof on 16061. It logs to
# OUT/manager.log and OUT/sidecar.log, and sets m and s to the two PIDs and out_dir to OUT.
# The arrays extra_env (variables for both processes) and manager_flags (flags after the
# manager's own, where the last of a flag wins) measure another setting; either may be left
# unset.
start_pod() {
  out_dir=$1
  local -a margs sargs menv senv
  mapfile -t margs < <(pod_args manager -metrics-bind-address=127.0.0.1:16062)
  mapfile -t sargs < <(pod_args sidecar)
  # The variables the kubelet gives each container from its resources (MEMORY_LIMIT).
  mapfile -t menv < <(pod_args manager -env)
  mapfile -t senv < <(pod_args sidecar -env)
  env "${menv[@]}" "${extra_env[@]}" bin/manager "${margs[@]}" "${manager_flags[@]}" \
    --pprof-bind-address=127.0.0.1:16060 >"$out_dir/manager.log" 2>&1 &
  m=$!
  env "${senv[@]}" "${extra_env[@]}" bin/manager "${sargs[@]}" \
    --pprof-bind-address=127.0.0.1:16061 >"$out_dir/sidecar.log" 2>&1 &
  s=$!
}

# running fails once the manager or the sidecar has exited, printing the end of its log, so
# that a wait on either ends with it.
running() {
  local name pid
  for name in manager:$m sidecar:$s; do
    pid=${name#*:} name=${name%%:*}
    kill -0 "$pid" 2>/dev/null && continue
    echo "the $name exited; the end of its log:" >&2
    tail -n 20 "$out_dir/$name.log" >&2
    return 1
  done
}

# pod_args CONTAINER [FLAG...] prints a container's arguments, one per line (with -env, its
# environment as NAME=value).
pod_args() {
  go run ./hack/podargs -kustomize=bin/kustomize -leader-election-namespace="$LEASE_NS" -container="$@"
}

extra_env=() manager_flags=()
