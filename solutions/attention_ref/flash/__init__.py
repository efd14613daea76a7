"""FlashAttention in Triton (lesson 11): the reference kernels, their launchers and the checks that
grade a notebook's kernels on any machine.

The part of the library that needs Triton besides numpy and torch, and that nothing else in the
library imports (autograde_tests/test_layers.py checks both): the library itself still runs with
numpy and torch alone.

Importing this package decides where kernels run before it imports Triton (runtime): where no
CUDA GPU is present it sets ``TRITON_INTERPRET=1`` (unless it is set already), and every
``@triton.jit`` kernel, here or in a notebook, then runs in Triton's interpreter, on the CPU, on
CPU tensors, with NumPy doing the arithmetic of each block; on a CUDA machine the same kernels are
compiled for the GPU. Import it before anything that imports Triton.

runtime       where kernels run (INTERPRETED), Triton or its stand-ins where it is missing
              (UNAVAILABLE says why), describe(), kernel_device()
forward       the forward kernels, the launchers, the forward exercises' test helpers
backward      the backward kernel, the autograd Function, the backward exercises' test helpers
checker       every interpreted launch checked: loads and stores outside the tensors, races
launches      what each launch specialized, as Triton's JIT computes it
compiler      Triton's compiler on any machine: a kernel built for sm_80 ... sm_120
interpreter   Triton's interpreter, with triton.language put back after each launch

What a lesson uses, from here (``import attention_ref.flash as flash``):

launch(kernel, grid, args, constants)        launch any kernel as the launchers below do: checked
softmax(x, kernel)                           launch a row-softmax kernel, one program per row
attention(q, k, v, kernel, block_q=16)       launch a kernel over (block of queries, batch x head),
                                             grouped-query attention when k, v have fewer heads
attend_blocks                                the inner loop over key blocks, written once
softmax_kernel, attention_kernel, causal_attention_kernel, cached_causal_attention_kernel
key_blocks_read(kernel, ...)                 which key blocks each query block reads
expect_own_kernel(kernel, name)              a test helper: the notebook's own kernel
compile_kernel(kernel, types, constants, arch)  Triton's compiler, for a GPU, on any machine
expect_compiles(kernel, name)                a test helper: every launch of it compiles, for
                                             sm_80, sm_90, sm_100 and sm_120
gpu_run_launch(kind)                         the launch a GPU timing run makes
attend_blocks_probe(helper, q, k, v, lo, hi)  a helper like attend_blocks, run on its own
"""

from __future__ import annotations

from attention_ref.flash.forward import (
    GPU_RUN,
    HEAD_DIMS,
    attend_blocks,
    attend_blocks_probe,
    attention,
    attention_kernel,
    cached_causal_attention_kernel,
    causal_attention_kernel,
    compile_kernel,
    expect_compiles,
    expect_helper_compiles,
    expect_own_kernel,
    gpu_run_launch,
    heads_and_group,
    key_blocks_read,
    launch,
    softmax,
    softmax_kernel,
)
from attention_ref.flash.runtime import (
    INTERPRETED,
    PRECISION,
    UNAVAILABLE,
    VARIABLE,
    describe,
    kernel_device,
    tl,
    triton,
)

__all__ = [
    "GPU_RUN",
    "HEAD_DIMS",
    "INTERPRETED",
    "PRECISION",
    "UNAVAILABLE",
    "VARIABLE",
    "attend_blocks",
    "attend_blocks_probe",
    "attention",
    "attention_kernel",
    "cached_causal_attention_kernel",
    "causal_attention_kernel",
    "compile_kernel",
    "describe",
    "expect_compiles",
    "expect_helper_compiles",
    "expect_own_kernel",
    "gpu_run_launch",
    "heads_and_group",
    "kernel_device",
    "key_blocks_read",
    "launch",
    "softmax",
    "softmax_kernel",
    "tl",
    "triton",
]
