# Shared by the service scripts (sourced, not run): what every one of them does the same way.

# stop_process LABEL PID [GRACE_S]: ask PID to stop (TERM), wait up to GRACE_S seconds (default 20)
# for a clean shutdown, then KILL it. Uses the caller's log().
stop_process() {
  local label=$1 pid=$2 grace=${3:-20} i
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < grace * 4; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.25
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "the $label (pid $pid) did not stop in ${grace}s: killing it"
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.5
  fi
  log "stopped the $label (pid $pid)"
}

# lock_for_change CMD DIR: one start/stop at a time per service directory (parallel test sessions,
# CI steps); `status` takes no lock. The lock (fd 9) is held until the script exits. Uses the
# caller's die().
lock_for_change() {
  local cmd=$1 dir=$2
  [ "$cmd" = status ] && return 0
  mkdir -p "$dir"
  exec 9>"$dir/.lock"
  flock -w 300 9 || die "timed out waiting for the lock on $dir/.lock"
}
