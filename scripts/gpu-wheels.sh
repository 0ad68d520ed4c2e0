#!/usr/bin/env bash
# Python wheels that the GPU machine lacks, for the gpu-check 'serve-trl' stage (TRL's GRPOTrainer
# against kforge serve on the GPU). That machine cannot reach a registry; its image has torch,
# transformers 5.17, accelerate 1.15, tokenizers, huggingface_hub 1.33, numpy, pandas, pyarrow,
# xxhash, psutil and pyyaml (/work/.library/device/KINDS.md, "Python packages already there"), but
# not trl, datasets, dill or multiprocess. This downloads exactly those four (pure Python, ~1.8 MB)
# for CPython 3.12 into DIR (default .gpu-wheels, ignored by git); name DIR in the device call's
# carry. The stage installs them with pip --no-index --no-deps into build-gpu/trl-site.
#   scripts/gpu-wheels.sh [DIR]
# The versions are the ones CI installs (KFORGE_WITH_TRL=1); trl 1.16 was run here against the GPU
# machine's transformers 5.17.0 / huggingface_hub 1.33.0 / tokenizers 0.23.2 (examples/rl/trl_grpo.py).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.gpu-wheels}
case "$dir" in -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
mkdir -p "$dir"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$dir" trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
ls -la "$dir"
du -sh "$dir"
