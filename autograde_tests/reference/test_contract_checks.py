"""The contract checks of attention_ref.testing (dtype, device, method), on every device here.

The lessons' tests use them to fail answers with the right numbers and the wrong contract: a mask
of 0/1 numbers, float32 inputs answered in float64, a tensor built on the CPU next to inputs on a
GPU (seen on any machine through PyTorch's meta device), a two-pass softmax where the exercise is
the one-pass algorithm. Each check must fail such answers and pass the reference library's own
functions, whatever device their inputs come from.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attention_ref.pt as rpt
from attention_ref.pt.model import BOS, EOS, VOCAB_SIZE, Transformer, greedy_decode, make_batch
from attention_ref.testing import (
    expect_device_agnostic,
    expect_device_argument,
    expect_does_not_call,
    expect_dtype,
    expect_integer,
    expect_one_pass,
    expect_own_function,
    expect_tensor_like,
    record_torch,
    spy,
)


def _fails(check, *args, **kwargs) -> str:
    with pytest.raises(AssertionError) as failure:
        check(*args, **kwargs)
    return str(failure.value)


def test_dtype_and_integer_checks():
    expect_dtype(np.zeros(3, dtype=bool), bool, "a mask")
    assert "expected dtype bool, got int64" in _fails(
        expect_dtype, np.zeros(3, int), bool, "a mask"
    )
    expect_dtype(torch.zeros(2, dtype=torch.bool), torch.bool, "a mask")
    assert "got float32" in _fails(expect_dtype, torch.zeros(2), torch.bool, "a mask")
    assert "torch.Tensor" in _fails(expect_dtype, np.zeros(2, bool), torch.bool, "a mask")
    expect_integer(3, "a count")
    expect_integer(np.int64(3), "a count")
    for not_a_count in (3.0, True, np.float64(3)):
        assert "expected an integer" in _fails(expect_integer, not_a_count, "a count")


def test_tensor_like_names_dtype_and_device(device):
    x = torch.randn(2, 3, device=device)
    expect_tensor_like(x * 2, x, "the result")
    assert "the inputs are float32, the result is float64" in _fails(
        expect_tensor_like, x.double(), x, "the result"
    )
    assert "expected a torch.Tensor" in _fails(expect_tensor_like, x.cpu().numpy(), x, "the result")
    if device.type != "cpu":
        assert "the result is on cpu" in _fails(expect_tensor_like, x.cpu(), x, "the result")


def _library_calls(device):
    """(name, function, args, kwargs, truth) of reference functions that run where their inputs
    live: each must pass expect_device_agnostic from any device."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, n, 8, generator=g).to(device) for n in (4, 6, 6))
    causal = rpt.causal_mask(4, 6, device=device)
    p = {name: t.to(device) for name, t in rpt.init_params(16, 4, g).items()}
    layer = {
        part: {name: t.to(device) for name, t in values.items()}
        for part, values in rpt.init_decoder_layer_params(16, 4, 32, g).items()
    }
    y, memory = torch.randn(2, 5, 16, generator=g).to(device), torch.randn(2, 7, 16).to(device)
    model = Transformer(VOCAB_SIZE, VOCAB_SIZE, 16, 2, 32, 1, 1, generator=g).to(device).eval()
    src = make_batch("reverse", 3, generator=torch.Generator().manual_seed(1), device=device)[0]
    return [
        ("sdpa", rpt.scaled_dot_product_attention, (q, k, v, causal), {}, None),
        ("multi_head_attention", rpt.multi_head_attention, (y, memory, memory, p, 4), {}, None),
        ("decoder_layer", rpt.decoder_layer, (y, memory, layer, 4), {}, None),
        ("tiled_attention", rpt.tiled_attention, (q, k, v, causal), {"block_size": 4}, None),
        ("cached_self_attention", rpt.cached_self_attention, (y[:, :1], p, 4, {}), {}, None),
        ("padding_mask", rpt.padding_mask, (torch.tensor([3, 1], device=device), 4), {}, False),
        ("greedy_decode", greedy_decode, (model, src, 3, BOS, EOS), {}, False),
    ]


def test_library_is_device_agnostic_on_meta(device):
    for name, fn, args, kwargs, truth in _library_calls(device):
        out = expect_device_agnostic(fn, *args, what=name, truth=truth, **kwargs)
        assert out is not None, f"{name}: the check was left undecided"
    expect_device_argument(rpt.positional_encoding, 10, 8, what="positional_encoding")
    expect_device_argument(rpt.causal_mask, 3, what="causal_mask")


def _masked_softmax_attention(q, k, v, mask, zeros):
    scores = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).masked_fill(~mask, -torch.inf)
    peak = scores.amax(-1, keepdim=True)
    exps = torch.exp(scores - torch.where(torch.isfinite(peak), peak, zeros(peak)))
    return exps / exps.sum(-1, keepdim=True).clamp_min(1e-30) @ v


def test_device_checks_fail_what_a_gpu_would_fail(device):
    q = torch.randn(2, 4, 8, device=device)
    mask = torch.ones(4, 4, dtype=torch.bool, device=device).tril()
    good = lambda *a: _masked_softmax_attention(*a, zeros=torch.zeros_like)  # noqa: E731
    scalar = lambda *a: _masked_softmax_attention(*a, zeros=lambda t: torch.tensor(0.0))  # noqa: E731
    on_cpu = lambda *a: _masked_softmax_attention(*a, zeros=lambda t: torch.zeros(t.shape))  # noqa: E731
    expect_device_agnostic(good, q, q, q, mask, what="good")
    expect_device_agnostic(scalar, q, q, q, mask, what="a CPU scalar, fine on a GPU too")
    assert "a tensor made on the CPU met them" in _fails(
        expect_device_agnostic, on_cpu, q, q, q, mask, what="zeros on the CPU"
    )
    assert "with .cpu()" in _fails(
        expect_device_agnostic, lambda *a: good(*a).cpu(), q, q, q, mask, what="moved"
    )
    assert "came back on ['cpu']" in _fails(
        expect_device_argument, lambda n, *, device=None: torch.zeros(n), 3, what="ignores device"
    )
    # a function that looks at values cannot be checked on meta: undecided, so it passes
    assert expect_device_agnostic(lambda x: x if x.any() else -x, q, what="reads values") is None
    with pytest.raises(NotImplementedError):  # an exercise's stub keeps its own error
        expect_device_agnostic(
            lambda x: (_ for _ in ()).throw(NotImplementedError()), q, what="stub"
        )


def _one_pass(row):
    running_max, running_sum = -np.inf, 0.0
    for x in row:
        new_max = max(running_max, x)
        if new_max > -np.inf:
            running_sum = running_sum * np.exp(running_max - new_max) + np.exp(x - new_max)
            running_max = new_max
    return np.exp(row - running_max) / running_sum


def _two_loops(row):
    peak = max(row)
    return np.exp(row - peak) / sum(np.exp(x - peak) for x in row)


def _max_then_sum(row):
    exps = np.exp(row - np.max(row))
    return exps / exps.sum()


def _calls_torch_softmax(row):
    return torch.softmax(torch.from_numpy(np.asarray(row)), dim=-1).numpy()


def test_one_pass_check():
    row = np.array([0.5, -1.0, 2.0, 0.0, 3.5, 3.4])
    want = np.exp(row - row.max()) / np.exp(row - row.max()).sum()
    np.testing.assert_allclose(expect_one_pass(_one_pass, row, "one pass"), want)
    assert "entries 12 times" in _fails(expect_one_pass, _two_loops, row, "two loops")
    assert "reduced the whole row" in _fails(expect_one_pass, _max_then_sum, row, "two passes")
    assert "calls softmax" in _fails(expect_one_pass, _calls_torch_softmax, row, "built-in")


def test_recording_and_spying(device):
    x, w = torch.randn(2, 4, 6, device=device), torch.randn(5, 4, 1, device=device)
    _, ran = record_torch(F.conv1d, x, w)
    assert ran.count("conv") == 1 and ran.largest_bytes >= 2 * 5 * 6 * 4
    expect_does_not_call(torch.softmax, x, -1, name="scaled_dot_product_attention", what="fine")
    assert "calls PyTorch's scaled_dot_product_attention" in _fails(
        expect_does_not_call, F.scaled_dot_product_attention, x, x, x,
        name="scaled_dot_product_attention", what="the built-in",
    )  # fmt: skip
    model = torch.nn.Linear(6, 6).to(device)
    watched, calls = spy(model, "forward")
    watched(x)
    with torch.no_grad():
        watched(x)
    assert calls == [("forward", True), ("forward", False)]
    model(x)  # the original is unchanged
    assert len(calls) == 2


def test_own_function_sees_through_torch_decorators():
    namespace = {"__name__": "__main__", "torch": torch, "greedy_decode": greedy_decode}
    exec(  # a notebook's cell: a decorated function of its own, and the library's, decorated
        "@torch.no_grad()\ndef mine(x):\n    return x\n"
        "@torch.inference_mode()\ndef also_mine(x):\n    return x\n"
        "theirs = torch.no_grad()(greedy_decode)\n",
        namespace,
    )
    expect_own_function(namespace["mine"], "mine")
    expect_own_function(namespace["also_mine"], "also_mine")
    assert "not from this notebook" in _fails(expect_own_function, namespace["theirs"], "theirs")


_DEVICE_CHECK_IN_A_FRESH_PROCESS = """
import sys, torch
from attention_ref.testing import expect_device_agnostic
from attention_ref.testing.dynamo_free import _wrapped_references
import attention_ref.pt as rpt
q = torch.randn(2, 4, 8)
mask = torch.ones(4, 4, dtype=torch.bool).tril()
out = expect_device_agnostic(rpt.scaled_dot_product_attention, q, q, q, mask, what="sdpa")
loss = expect_device_agnostic(
    lambda x: torch.nn.functional.log_softmax(x / 2.0 - 1, -1).tril().sum(), q, what="refs"
)
print("checked on", out.device, loss.device)
print("dynamo imported by the check:", "torch._dynamo" in sys.modules)
cached = lambda: sum(hasattr(f, "__dynamo_disable") for f in _wrapped_references())
print("left in PyTorch's cache:", cached())
import torch._dynamo
torch.randn(3, device="meta") / 2.0  # after the check, PyTorch's own path: dynamo disabled
print("wrappers found:", len(_wrapped_references()))
print("cached by PyTorch afterwards:", cached())
"""


def test_device_check_runs_without_importing_the_compiler():
    """The meta-device check does not import torch._dynamo (1.2-1.5 s and about 900 modules per
    graded notebook) and leaves PyTorch's own lazy import as it found it."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _DEVICE_CHECK_IN_A_FRESH_PROCESS],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "checked on meta meta" in out, out
    assert "dynamo imported by the check: False" in out, out
    assert "left in PyTorch's cache: 0" in out, out
    if "wrappers found: 0" in out:  # torch 2.6 (make versions): its meta kernels import no dynamo
        pytest.skip("this PyTorch wraps none of its meta references in _disable_dynamo")
    cached = int(out.rsplit("cached by PyTorch afterwards:", 1)[1])
    assert cached > 0, out  # the same wrappers found by the walk are the ones PyTorch caches in
