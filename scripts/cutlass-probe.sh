#!/usr/bin/env bash
# CUTLASS against kforge's own PTX wrappers: compile time and speed (docs/perf-notes.md).
#   scripts/cutlass-probe.sh fetch     here (with network): CUTLASS's headers into .cutlass/include
#                                      (from the nvidia-cutlass wheel; ignored by git; carry it)
#   scripts/cutlass-probe.sh run [N]   on the GPU machine: compile scripts/cutlass-probe.cu (timed)
#                                      and run it at N^3 (default 8192 4096 2048), tn, vs cublasGemmEx
#                                      (CUTLASS_PROBE_BIN=FILE: run a binary compiled elsewhere with the
#                                      same nvcc line; carry its folder)
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  fetch)
    tmp=$(mktemp -d)
    python3 -m pip download -q nvidia-cutlass --no-deps -d "$tmp"
    python3 -m zipfile -e "$tmp"/nvidia_cutlass-*.whl "$tmp/x"
    rm -rf .cutlass && mkdir -p .cutlass && cp -r "$tmp/x/cutlass_library/source/include" .cutlass/include
    cp -r "$tmp/x/cutlass_library/source/tools/util/include/cutlass/util" .cutlass/include/cutlass/util
    echo "cutlass-probe: headers in .cutlass/include ($(du -sh .cutlass | cut -f1)); carry .cutlass to the GPU machine"
    rm -rf "$tmp" ;;
  run)
    shift
    [ -n "${CUTLASS_PROBE_BIN:-}" ] || [ -d .cutlass/include ] ||
      { echo "cutlass-probe: no .cutlass/include: run 'scripts/cutlass-probe.sh fetch' first"; exit 1; }
    out=${OUT:-results/cutlass-probe}
    mkdir -p "$out"
    [ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
    bin=${CUTLASS_PROBE_BIN:-}
    if [ -z "$bin" ]; then
      t0=$SECONDS
      bin=$out/cutlass-probe
      nvcc -O3 -std=c++17 -arch=sm_90a --expt-relaxed-constexpr -DNDEBUG -I.cutlass/include -o "$bin" scripts/cutlass-probe.cu -lcublas
      echo "cutlass-probe: one CUTLASS kernel compiled in $((SECONDS - t0)) s"
    else
      echo "cutlass-probe: using the binary built elsewhere, $bin"
    fi
    "$bin" "$@" | tee "$out/cutlass-probe.txt" ;;
  *)
    sed -n '2,7p' "$0"; exit 2 ;;
esac
