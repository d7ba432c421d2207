#!/usr/bin/env bash
# Per-thread CPU and context switches of a running process, over a few seconds: where a process's
# cores go (for example a dma-bench run's worker, target and virtual-thread carriers).
#
# Usage: dma-bench/scripts/thread-cpu.sh PID [SECONDS]   (Linux /proc; prints threads above 1 %)
set -euo pipefail
pid=$1
secs=${2:-3}
hz=$(getconf CLK_TCK)
declare -A cpu switches
sample() { # $1: thread dir; prints "ticks switches"
  local fields
  read -r -a fields <<<"$(sed 's/.*) //' "$1/stat")"
  echo "$((fields[11] + fields[12])) $(awk '/ctxt_switches/ {n += $2} END {print n}' "$1/status")"
}
for t in /proc/"$pid"/task/*; do
  read -r c s <<<"$(sample "$t")" && cpu[${t##*/}]=$c && switches[${t##*/}]=$s || true
done
sleep "$secs"
printf '%-24s %6s %12s\n' thread cpu switches/s
for t in /proc/"$pid"/task/*; do
  id=${t##*/}
  read -r c s <<<"$(sample "$t")" || continue
  used=$(( (c - ${cpu[$id]:-$c}) * 100 / (hz * secs) ))
  if (( used >= 1 )); then
    printf '%-24s %5d%% %12d\n' "$(cat "$t/comm")" "$used" $(( (s - ${switches[$id]:-$s}) / secs ))
  fi
done
