#!/usr/bin/env bash
# One device call that runs several stages, each under its own time limit, and brings everything
# back as one archive (the device tool returns at most 8 files and 12 kB of output):
#   OUT=... scripts/gpu-session.sh STAGE[:SECONDS] ...
# A STAGE is a stage of scripts/gpu-check.sh (build, repeat, judge, gatecost, ...), one of
# scripts/gpu-check-pytorch.sh prefixed "pt-" (pt-tasks, pt-corpus), or "table" (the dispatch
# table's most used variants through the full judge: scripts/judge-table.py, TABLE_TOP variants).
# SECONDS (default 300) bounds the stage; a stage that fails or runs out is reported and the next
# one still runs. Each stage's output goes to $OUT/<stage>.log, and its last lines are printed.
# At the end everything under $OUT is packed into $OUT/session.tgz (the originals removed).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:?set OUT to the folder the results go to}
mkdir -p "$out"
export OUT=$out
(($#)) || { echo "usage: OUT=DIR scripts/gpu-session.sh STAGE[:SECONDS] ..." >&2; exit 2; }
for spec in "$@"; do
  stage=${spec%%:*}
  secs=300
  [[ $spec == *:* ]] && secs=${spec#*:}
  [[ $secs =~ ^[0-9]+$ ]] || { echo "error: '$spec': the time limit must be whole seconds" >&2; exit 2; }
  t0=$(date +%s)
  echo "== $stage (limit ${secs} s)"
  case $stage in
    pt-*) timeout -k 2 "$secs" scripts/gpu-check-pytorch.sh "${stage#pt-}" >"$out/$stage.log" 2>&1 ;;
    table) timeout -k 2 "$secs" python3 scripts/judge-table.py --kforge build-gpu/kforge --top "${TABLE_TOP:-8}" \
             --out "$out/table" >"$out/$stage.log" 2>&1 ;;
    *) timeout -k 2 "$secs" scripts/gpu-check.sh "$stage" >"$out/$stage.log" 2>&1 ;;
  esac
  rc=$?
  echo "   rc $rc after $(( $(date +%s) - t0 )) s$([ $rc = 124 ] && echo ' (ran out of time)')"
  tail -n "${TAIL_LINES:-6}" "$out/$stage.log" | cut -c1-300
done
sleep 1
cd "$out" && { tar czf session.tgz --exclude=session.tgz --warning=no-file-changed . || [ $? = 1 ]; } && find . -mindepth 1 ! -name session.tgz -delete
ls -la "$out"
