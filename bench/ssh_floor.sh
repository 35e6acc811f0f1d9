#!/bin/bash
# The floor: one plain `ssh HOST <probe script>` per host, all at once, no Python anywhere.
#   bench/ssh_floor.sh SSH_CONFIG PROBE_FILE OUT_DIR cold|mux HOST...
# cold: a fresh connection per host (ControlMaster=no), like gpuhost's own fresh connections;
# mux:  through ControlMaster masters kept for 600 s (ControlPersist), warm after a first run.
set -u
config=$1 probe=$2 out=$3 mode=$4; shift 4
mkdir -p "$out"
script=$(cat "$probe")
opts=(-F "$config")
if [ "$mode" = cold ]; then opts+=(-o ControlMaster=no -o ControlPath=none); else opts+=(-o ControlPersist=600); fi
for host in "$@"; do
  ssh "${opts[@]}" "$host" "$script" >"$out/$host" 2>&1 &
done
rc=0
for job in $(jobs -p); do wait "$job" || rc=1; done
exit $rc
