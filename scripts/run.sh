#!/usr/bin/env bash
# Builds kforge, checks the machine, and runs the main job: the HGEMM baseline benchmark over the
# 1,000-shape grid (offline mode, both layouts, every baseline). Results go to results/.
# Extra arguments are passed to `kforge hgemm bench` (e.g. --shapes 4096x4096x4096 --mode graph).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)"
./build/kforge doctor
mkdir -p results
stamp=$(date -u +%Y%m%dT%H%M%SZ)
./build/kforge hgemm bench --out "results/hgemm-bench-$stamp.csv" --out "results/hgemm-bench-$stamp.json" \
  --db results/kforge.db "$@"
