#!/usr/bin/env bash
# On the lent GPU machine, after kforge is built (scripts/gpu-check.sh build, into build-gpu/):
# the PyTorch-task GPU tests. Builds nothing itself.
#   scripts/gpu-check-pytorch.sh [tasks] [corpus]     (default: both)
#   tasks   a full pass over tasks/kforge with every baseline (eager, torch.compile, reduce-overhead,
#           CUDA graphs), cold caches, must take under 10 minutes; the metrics table goes to $OUT
#   corpus  the red-team corpus (tests/corpus/torch/manifest.json) with the static scan, then with
#           the run-time defences alone (PT_CORPUS_PASS=scan|runtime one of them; KFORGE_CORPUS_ONLY
#           =REGEX a subset of the entries)
# Results and logs go to $OUT (or results/gpu-check-pytorch when OUT is unset):
#   own-tasks-metrics.csv/.json, own-tasks-verdicts.json, own-tasks-table.txt, corpus-*.json, *.log
# Needs python3 with torch (CUDA) and ninja on PATH; KFORGE_BUILD names another build folder;
# KFORGE_KEEP_CACHE=1 keeps the cache of built extensions and compiled baselines (a warm pass).
set -uo pipefail
cd "$(dirname "$0")/.."
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"  # nvcc for load_inline
out=${OUT:-results/gpu-check-pytorch}
mkdir -p "$out"
build=${KFORGE_BUILD:-build-gpu}
tests=./$build/kforge_gpu_tests
[ -x "$tests" ] || { echo "no $tests: build first (scripts/gpu-check.sh build)"; exit 1; }
stages=("$@")
((${#stages[@]})) || stages=(tasks corpus)
has() { local s; for s in "${stages[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
export KFORGE_TORCH_OUT=$(cd "$out" && pwd)  # absolute: $OUT may be either
# A cache of its own, emptied: the full pass is timed from a cold start (extensions, Inductor, Triton).
export KFORGE_CACHE_DIR=$PWD/$build/cache-pytorch
has tasks && [ "${KFORGE_KEEP_CACHE:-0}" != 1 ] && rm -rf "$KFORGE_CACHE_DIR"
echo "== probe"
python3 python/kforge_worker probe | tee "$out/probe.json"
status=0
if has tasks; then
  echo "== full pass over tasks/kforge, every baseline"
  "$tests" --gtest_filter='TorchGpuTest.OwnTasks*' 2>&1 | tee "$out/own-tasks.log" | tail -40 || status=1
  grep -q "FAILED" "$out/own-tasks.log" && status=1
fi
if has corpus; then
  echo "== red-team corpus"
  # PT_CORPUS_PASS=scan|runtime runs one of the two passes; KFORGE_CORPUS_ONLY=REGEX only the
  # entries whose file or task matches (the test prints each verdict as it lands, so a pass cut
  # by its time limit still shows every verdict it reached).
  case ${PT_CORPUS_PASS:-both} in
    scan) filter='TorchGpuTest.RedTeamCorpusWithTheStaticScan' ;;
    runtime) filter='TorchGpuTest.RedTeamCorpusRunTimeDefencesOnly' ;;
    both) filter='TorchGpuTest.RedTeam*' ;;
    *) echo "PT_CORPUS_PASS must be scan, runtime or both, not '$PT_CORPUS_PASS'" >&2; exit 2 ;;
  esac
  "$tests" --gtest_filter="$filter" 2>&1 | tee "$out/corpus.log" | grep -v "^\[ *OK\|^\[ RUN" | tail -90 || status=1
  grep -q "FAILED" "$out/corpus.log" && status=1
fi
exit $status
