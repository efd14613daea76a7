#!/usr/bin/env bash
# What only a GPU can show, in one run of about eight minutes on a machine with an NVIDIA GPU and
# its own python3 (PyTorch with CUDA, numpy, matplotlib, pytest, hypothesis, triton; no Jupyter,
# no nbgrader, no network), from the repository's root:
#
#     bash coursekit/bench/gpu_check.sh          # the device tool: its log lands in $OUT
#
# 1. the reference tests on CUDA (every test parametrized by device, and lesson 11's kernels
#    compiled and launched there, not interpreted);
# 2. lesson 11's racy kernel, which the course's checker refuses on a CPU, shown losing updates on
#    the GPU, beside tl.atomic_add, which loses none; lesson 13's gated delta rule, recurrent
#    against chunked (python -m coursekit.bench.gpu_check);
# 3. make bench's GPU section: tiled attention and lesson 11's kernels against
#    F.scaled_dot_product_attention's FlashAttention.
# Each step has its own time limit and the next runs whatever the last did. Without a GPU every
# step still runs (on the CPU, small), which is how it is checked where it is written:
# GPU_CHECK_QUICK=1 keeps the reference tests to a few there.
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
LOG=${OUT:-build/gpu-check}/gpu_check.log
mkdir -p "$(dirname "$LOG")"
export PYTHONPATH="solutions:.${PYTHONPATH:+:$PYTHONPATH}"
step() { echo; echo "== $1 ($(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg))"; }
if [ "${GPU_CHECK_QUICK:-0}" = 1 ]; then SELECT="triton_mode"; else SELECT="cuda or flash"; fi
{
  step "the machine"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "no nvidia-smi"
  "$PY" -c "import torch, numpy; print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'numpy', numpy.__version__)"
  "$PY" -c "import triton; print('triton', triton.__version__)" || echo "no Triton"

  step "1. the reference tests on CUDA: -k '$SELECT' (limit 300 s)"
  timeout 300 "$PY" -m pytest -q -p no:cacheprovider -k "$SELECT" autograde_tests/reference \
    | tail -25
  echo "pytest: exit ${PIPESTATUS[0]}"

  step "2. lesson 11's race on the device, lesson 13's recurrent against chunked (limit 150 s)"
  timeout 150 "$PY" -m coursekit.bench.gpu_check
  echo "gpu_check: exit $?"

  step "3. make bench's GPU section (limit 240 s)"
  timeout 240 "$PY" -m coursekit.bench --only gpu
  echo "bench: exit $?"
} 2>&1 | tee "$LOG"
