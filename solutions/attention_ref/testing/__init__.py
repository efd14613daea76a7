"""Checks used by the lessons' test cells, written so that a failure says what is wrong.

Every ``expect_*`` raises AssertionError with a message that names the property that failed
(and, where one helps, a hint about why), so a learner reads the message, not the test code.

The checks cannot be fooled by replacing what they rely on: each first verifies that the functions
the tests use (``np.allclose``, ``np.testing.*``, ``torch.allclose``,
``torch.testing.assert_close``, builtins such as ``isinstance``, the reference library and these
helpers themselves) are still the objects that were there when this package was imported, and
fails with a message that says what was replaced.

The parts (import the names from here, ``from attention_ref.testing import expect_close``):

* ``tamper`` -- the snapshot of what the tests rely on, and the check that nothing was replaced;
* ``checks`` -- values, shapes, errors, dtypes, integers, a tensor's device and dtype;
* ``ownership`` -- a graded function is the notebook's own, not the reference's answer;
* ``meta_device`` -- the device contract, checked on PyTorch's meta device on any machine;
* ``dynamo_free`` -- lets that check run PyTorch's meta kernels without importing its compiler;
* ``spies`` -- which PyTorch functions (and which methods of an object) a call ran;
* ``one_pass`` -- a single pass over a row, watched by an ndarray subclass;
* ``blocks`` -- the matrix products a call computes: one block of keys at a time (tiled attention),
  the newest position only (a KV cache);
* ``cost`` -- what one call costs, as one record: multiply-adds, numbers written, bytes allocated,
  peak and kept, lines of the notebook's code run;
* ``growth`` -- a method clause as a law of growth: that cost at two or three sizes;
* ``holdings`` -- everything a state holds, by reachability (dict keys, lists, attributes, every
  buffer once), and a graded call that keeps no state outside its arguments;
* ``display`` -- how a failed check reads in a notebook: the message first, the notebook's own
  lines, the course's frames left out, the check's hint (attention_ref.hints) added (registered
  with IPython when this package is imported).
"""

from __future__ import annotations

from . import display, tamper
from .blocks import expect_key_blocks, expect_newest_position_only
from .checks import (
    expect_close,
    expect_dtype,
    expect_integer,
    expect_raises,
    expect_shape,
    expect_tensor_like,
    fail,
    to_numpy,
)
from .cost import Cost, cost_profile
from .growth import expect_growth, growth
from .holdings import Holdings, expect_holds_at_most, expect_no_hidden_state, holdings
from .meta_device import expect_device_agnostic, expect_device_argument
from .one_pass import expect_one_pass
from .ownership import expect_no_library_call, expect_own_function, from_library
from .spies import TorchRecord, expect_does_not_call, record_torch, spy
from .tamper import library_wrapper, require_untampered

# The names these had when the package was one module (attention_ref/flash.py uses _from_library).
_fail, _from_library, _require_untampered = fail, from_library, require_untampered

__all__ = [
    "Cost",
    "Holdings",
    "TorchRecord",
    "cost_profile",
    "expect_growth",
    "expect_holds_at_most",
    "expect_no_hidden_state",
    "growth",
    "holdings",
    "expect_close",
    "expect_device_agnostic",
    "expect_device_argument",
    "expect_does_not_call",
    "expect_dtype",
    "expect_integer",
    "expect_key_blocks",
    "expect_no_library_call",
    "expect_newest_position_only",
    "expect_one_pass",
    "expect_own_function",
    "expect_raises",
    "expect_shape",
    "expect_tensor_like",
    "fail",
    "from_library",
    "library_wrapper",
    "record_torch",
    "require_untampered",
    "spy",
    "to_numpy",
]

# Every part is imported now, so the originals recorded include all of their functions.
tamper.snapshot()
# In a notebook (and a grading kernel, whose guard snapshots IPython after this import): failed
# checks read message first.
display.register()
