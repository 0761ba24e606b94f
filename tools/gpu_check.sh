#!/usr/bin/env bash
# One prepared pass over everything that needs a CUDA machine: the gpu-marked tests and the ratio
# benchmarks at the sizes the issues name. Device time is scarce, so every step has its own time
# limit, the whole pass stops starting new steps at $DEADLINE seconds, and one failing step never
# stops the others.
#
# Usage (on the GPU machine, from the repo root; wheels built beforehand into .whl/):
#   OUT=/some/dir DEADLINE=480 [STEPS="gpu-tests ltc ..."] bash tools/gpu_check.sh
# STEPS names the steps to run (default: all of them).
# Prepare the wheels here with `PY=<python with build+hatchling> bash tools/gpu_wheels.sh`.
# compressai has no cp312 wheel: when its sdist lies in .whl/ (pip download --no-binary :all:
# --no-deps compressai==1.2.8) it is compiled there (pybind11 and a compiler are in the image) and the
# AuxT benchmark and reproduction run last.
set -u
OUT=${OUT:-/tmp/iclr25-gpu}
DEADLINE=${DEADLINE:-480}
mkdir -p "$OUT"
START=$SECONDS
LOG="$OUT/bench.log"

if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || { echo "wheel install failed" >&2; exit 2; }
    export PYTHONPATH=/tmp/site
fi
export PYTHONUNBUFFERED=1
export MUJOCO_GL=disable  # ARS needs no rendering, and the image has no EGL loader for PyOpenGL

{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    python3 -c "import sys, torch, numpy; print(sys.version.split()[0], 'torch', torch.__version__, 'numpy', numpy.__version__, 'cuda', torch.cuda.is_available())"
    python3 -c "import triton; print('triton', triton.__version__)"
} >"$OUT/env.txt" 2>&1

step() {  # step NAME LIMIT_S CMD...
    local name=$1 limit=$2
    shift 2
    if [ -n "${STEPS:-}" ] && [[ " $STEPS " != *" $name "* ]]; then
        return
    fi
    local left=$((DEADLINE - (SECONDS - START)))
    if [ "$left" -lt 15 ]; then
        echo "### $name: SKIPPED (deadline)" >>"$LOG"
        return
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    echo "### $name (limit ${limit}s): $*" >>"$LOG"
    local t0=$SECONDS
    timeout "$limit" "$@" >>"$LOG" 2>&1
    echo "### $name: rc=$? in $((SECONDS - t0))s" >>"$LOG"
}

step gpu-tests 90 python3 -m pytest -q -p no:cacheprovider -m gpu --continue-on-collection-errors -o addopts="" -p iclr25.core.testing \
    --import-mode=importlib packages/iclr25-core/tests packages/iclr25-neuro/tests packages/iclr25-llm/tests \
    packages/iclr25-theory/tests packages/iclr25-compress/tests packages/iclr25-generative/tests packages/iclr25-rl/tests
B=packages
step ltc 60 python3 $B/iclr25-compress/benchmarks/ltc_quantize.py --device cuda
step minkpp 45 python3 $B/iclr25-llm/benchmarks/minkpp_score.py --device cuda
step arb 60 python3 $B/iclr25-llm/benchmarks/arb_ptq.py --device cuda --rows 4096 --cols 4096
step gemv 45 python3 $B/iclr25-llm/benchmarks/arb_gemv.py --device cuda
step markov 60 python3 $B/iclr25-theory/benchmarks/markov_sampler.py --device cuda --runs 64
step lambda 45 python3 $B/iclr25-theory/benchmarks/lambda_balanced_batch.py --device cuda
step unet 45 python3 $B/iclr25-generative/benchmarks/core_unet.py --device cuda
step barrel 45 python3 $B/iclr25-neuro/benchmarks/barrel_epoch.py --device cuda --sweeps 10
step lm 30 python3 $B/iclr25-llm/benchmarks/lm_train_step.py --device cuda --threads 1
step aihf 30 python3 $B/iclr25-rl/benchmarks/aihf_bench.py --device cuda
step lif 30 python3 $B/iclr25-neuro/benchmarks/spiking_lif.py --device cuda
step gif 30 python3 $B/iclr25-neuro/benchmarks/spiking_gif.py --device cuda
step topoloss 30 python3 $B/iclr25-neuro/benchmarks/topoloss_overhead.py --device cuda --d 768
step hocal 30 python3 $B/iclr25-theory/benchmarks/ho_calibration_em.py --device cuda
step efgpg 30 python3 $B/iclr25-rl/benchmarks/efg_pg_bench.py
step chat 60 python3 $B/iclr25-llm/benchmarks/bench_hf_generate.py --device cuda --size 100m --prompts 64 \
    --new-tokens 128 --batch 32
step radar 45 python3 $B/iclr25-llm/benchmarks/radar_decode.py --device cuda
step topodiff 60 python3 $B/iclr25-generative/benchmarks/topodiffusion.py --device cuda --size 64 --batch 64 --steps 10 \
    --images 64
step tcm 60 python3 $B/iclr25-generative/benchmarks/tcm.py --device cuda --unet --sample
step tcm-digits 150 python3 -c "from iclr25.generative.tcm import run_digits_variant as r; \
print(r((4000, 3000, 1500), seed=0, device='cuda').to_json())"
step videoniah 60 python3 $B/iclr25-llm/benchmarks/videoniah_compose.py --device cuda --numpy-haystacks 20 --check-every 2
if ls .whl/compressai-*.tar.gz >/dev/null 2>&1; then
    step compressai-build 120 python3 -m pip install -q --no-index --no-deps --no-build-isolation --target /tmp/site \
        .whl/compressai-*.tar.gz
    step auxt-repro 150 python3 -m iclr25.core reproduce auxt --device cuda --out "$OUT/auxt"
    step auxt-bench 200 python3 $B/iclr25-compress/benchmarks/auxt_step.py --device cuda
    # At which budget do the RD curves allow a BD-rate? (undefined after 600 CPU steps, docs/papers/auxt.md)
    step auxt-rd 240 python3 $B/iclr25-compress/benchmarks/auxt_rd_sweep.py --device cuda --steps 4000 --crop 128
fi
echo "### total $((SECONDS - START))s" >>"$LOG"
