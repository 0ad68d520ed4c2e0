#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages kforge builds with. The CUDA toolkit (nvcc, cuBLAS, cuBLASLt)
# must already be installed (NVIDIA's packages); this script checks for it and says so if missing.
set -euo pipefail

packages=(cmake ninja-build g++ pkg-config libsqlite3-dev nlohmann-json3-dev libcli11-dev libgtest-dev
          libcurl4-openssl-dev libcpp-httplib-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 || {
    "${sudo_cmd[@]}" apt-get update -qq >/dev/null
    "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
  }
fi

if ! command -v nvcc >/dev/null 2>&1; then
  if [ -x /usr/local/cuda/bin/nvcc ]; then
    echo "install-deps: nvcc is at /usr/local/cuda/bin but not on PATH; add it: export PATH=/usr/local/cuda/bin:\$PATH" >&2
  else
    echo "install-deps: the CUDA toolkit (nvcc 12.4 or newer, cuBLAS) is missing: install it from NVIDIA first" >&2
  fi
  exit 1
fi

# Optional: torch for the PyTorch worker's CPU tests (KFORGE_WITH_TORCH=1; .ci/run sets it). Without
# it those tests print SKIPPED and the protocol, scan, metrics and import tests still run. PyPI's
# default Linux wheel is a CUDA build, which the op of `kforge hgemm export --torch` needs even
# without a GPU (it links torch's CUDA libraries; HgemmTorch.OpBuilds... says SKIPPED on a CPU-only
# wheel such as download.pytorch.org/whl/cpu's).
if [ "${KFORGE_WITH_TORCH:-0}" = 1 ] && ! python3 -c "import torch" >/dev/null 2>&1; then
  echo "install-deps: installing torch for python3 (pip; KFORGE_WITH_TORCH=1)"
  t0=$SECONDS
  if timeout 900 python3 -m pip install -q torch >/tmp/kforge-pip-torch.log 2>&1; then
    echo "install-deps: torch $(python3 -c 'import torch; print(torch.__version__)') installed in $((SECONDS - t0)) s"
  else
    echo "install-deps: torch could not be installed ($(tail -n 1 /tmp/kforge-pip-torch.log)); the PyTorch worker tests will say SKIPPED" >&2
  fi
fi
# Optional: the nvidia-cutlass wheel, whose CUTLASS/CuTe headers HGEMM candidates may include
# (KFORGE_WITH_CUTLASS=1). The compile service finds them by itself (src/compile/compile.hpp);
# without them the CuTe candidate's compile test prints SKIPPED.
if [ "${KFORGE_WITH_CUTLASS:-0}" = 1 ] &&
   ! python3 -c "import importlib.util as u, sys; sys.exit(u.find_spec('cutlass_library') is None)" >/dev/null 2>&1; then
  echo "install-deps: installing nvidia-cutlass for python3 (pip; KFORGE_WITH_CUTLASS=1)"
  if timeout 600 python3 -m pip install -q nvidia-cutlass >/tmp/kforge-pip-cutlass.log 2>&1 ||
     timeout 600 python3 -m pip install -q --break-system-packages nvidia-cutlass >>/tmp/kforge-pip-cutlass.log 2>&1; then
    echo "install-deps: nvidia-cutlass installed"
  else
    echo "install-deps: nvidia-cutlass could not be installed ($(tail -n 1 /tmp/kforge-pip-cutlass.log)); CuTe candidates will not compile" >&2
  fi
fi
# Optional: TRL (and with it transformers, datasets, accelerate) for examples/rl/trl_grpo.py, the GRPO
# run against kforge serve (KFORGE_WITH_TRL=1). python/kforge_client itself needs only the standard
# library; without TRL the example's test prints SKIPPED. The GPU machine (no registry) gets trl,
# datasets, dill and multiprocess as wheels instead: scripts/gpu-wheels.sh, gpu-check stage serve-trl.
if [ "${KFORGE_WITH_TRL:-0}" = 1 ] && ! python3 -c "import trl" >/dev/null 2>&1; then
  echo "install-deps: installing trl for python3 (pip; KFORGE_WITH_TRL=1)"
  if timeout 900 python3 -m pip install -q trl >/tmp/kforge-pip-trl.log 2>&1; then
    echo "install-deps: trl $(python3 -c 'import trl; print(trl.__version__)') installed"
  else
    echo "install-deps: trl could not be installed ($(tail -n 1 /tmp/kforge-pip-trl.log)); the TRL example will say SKIPPED" >&2
  fi
fi
# Optional: Ray, for python/kforge_ray (kforge serve on a Ray cluster) and its test on simulated
# nodes (KFORGE_WITH_RAY=1; ServeRay.*). Its wheel is about 79 MB; without it that test prints SKIPPED.
if [ "${KFORGE_WITH_RAY:-0}" = 1 ] && ! python3 -c "import ray" >/dev/null 2>&1; then
  echo "install-deps: installing ray for python3 (pip; KFORGE_WITH_RAY=1)"
  if timeout 900 python3 -m pip install -q ray >/tmp/kforge-pip-ray.log 2>&1; then
    echo "install-deps: ray $(python3 -c 'import ray; print(ray.__version__)') installed"
  else
    echo "install-deps: ray could not be installed ($(tail -n 1 /tmp/kforge-pip-ray.log)); the Ray test will say SKIPPED" >&2
  fi
fi
# Optional: verl, so that verl's own reward loop (its loader and NaiveRewardManager) calls
# kforge_client.verl against a kforge serve (KFORGE_WITH_VERL=1; ServeClient.VerlRewardManagerCallsTheAdapter).
# verl pins its own transformers and tokenizers, so it goes into a virtual environment of its own,
# .verl-venv (ignored), that sees python3's packages (torch, ray) too; the test finds it there
# (or at $KFORGE_VERL_PYTHON). 0.9.1 is the version the adapter was written against. Without it
# that test prints SKIPPED (the signature test in tests/python/test_kforge_client.py still runs).
if [ "${KFORGE_WITH_VERL:-0}" = 1 ] && ! .verl-venv/bin/python -c "import verl" >/dev/null 2>&1; then
  echo "install-deps: installing verl 0.9.1 into .verl-venv (pip; KFORGE_WITH_VERL=1)"
  if python3 -m venv --system-site-packages .verl-venv >/tmp/kforge-pip-verl.log 2>&1 &&
     timeout 1200 .verl-venv/bin/python -m pip install -q verl==0.9.1 >>/tmp/kforge-pip-verl.log 2>&1; then
    echo "install-deps: verl $(.verl-venv/bin/python -c 'import verl; print(verl.__version__)') installed in .verl-venv"
  else
    echo "install-deps: verl could not be installed ($(tail -n 1 /tmp/kforge-pip-verl.log)); the verl test will say SKIPPED" >&2
  fi
fi
echo "install-deps: ok ($(nvcc --version | tail -n 1))"
