"""attention_ref.flash.runtime: where lesson 11's kernels run, and in what precision where they are
compiled: the environment variables it reads and sets."""

from __future__ import annotations

import os

from attention_ref.flash.runtime import MINIMUM, PRECISION, VARIABLE, _too_old, choose_interpreter


def test_compiled_kernels_multiply_float32_in_ieee_unless_told_otherwise(monkeypatch):
    monkeypatch.setenv(VARIABLE, "0")  # kernels compiled, as on a CUDA machine
    monkeypatch.delenv(PRECISION, raising=False)
    assert choose_interpreter() is False
    assert os.environ[PRECISION] == "ieee"  # Triton's own default on a GPU is TF32
    monkeypatch.setenv(PRECISION, "tf32")  # a choice made outside wins
    choose_interpreter()
    assert os.environ[PRECISION] == "tf32"


def test_interpreted_kernels_leave_the_precision_alone(monkeypatch):
    monkeypatch.setenv(VARIABLE, "1")
    monkeypatch.delenv(PRECISION, raising=False)
    assert choose_interpreter() is True
    assert PRECISION not in os.environ


def test_a_triton_older_than_the_checks_need_is_refused_with_what_to_do():
    wanted = ".".join(map(str, MINIMUM))
    assert _too_old(wanted + ".0") is None and _too_old("3.10.1+gitabc") is None
    assert _too_old("4.0") is None
    why = _too_old("3.8.0")
    assert why and "Triton 3.8.0 is installed here" in why and f"Triton {wanted} or newer" in why
    assert "pip install -U torch" in why and "restart the kernel" in why
    assert _too_old("2.3.1")
