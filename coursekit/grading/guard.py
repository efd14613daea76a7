"""Inside the grading kernel: keep everything the tests rely on as it was before submitted code ran.

A test cell passes when it raises nothing, so a submission can "pass" tests without solving
anything by changing what the tests call: ``np.allclose = lambda *a, **k: True``, rebinding
``expect_close`` in the notebook, making the reference library agree with its own answers
(``attention_ref.np.softmax = softmax``), swapping a function's ``__code__``, or telling IPython
to rewrite or swallow every later cell (input transformers, ``run_cell`` wrappers, event hooks).

The sandbox kernel (coursekit.grading.sandbox) calls :func:`install` before any submitted code runs;
it snapshots the modules, classes and IPython machinery the tests go through. After every cell the
grader (coursekit.grading.autograder.GuardedExecute) evaluates :func:`check` as a user expression
(which no input transformer touches): it compares the live objects with the snapshot, puts back
whatever was changed, and reports it. A cell after which something had to be put back is reported to
the instructor; a *test* cell after which something had to be put back earns no points (its result
cannot be trusted). If the guard itself is unusable the grader restarts the kernel and re-runs the
notebook without the offending cell.

This is defence in depth, not a security boundary: code in the same process can always reach
the guard's own state. coursekit.grading.integrity flags the constructs such code needs (``gc``,
``sys.modules``, ``get_ipython``, frame introspection, ...) before grading.
"""

from __future__ import annotations

import importlib
import json
import re
import secrets
import sys
import types

from attention_ref.testing import library_wrapper  # the same judgement the check helpers make

_MISSING = object()

# Modules whose every attribute must stay what it was (attention_ref.* is added at install).
WATCHED_MODULES = (
    "builtins",
    "math",
    "types",
    "functools",
    "operator",
    "inspect",
    "numpy",
    "numpy.random",
    "numpy.testing",
    "numpy.linalg",
    "numpy.lib",
    "torch",
    "torch.nn",
    "torch.nn.functional",
    "torch.testing",
    "torch.linalg",
)
# Attributes that legitimately change while a notebook runs.
_VOLATILE = {"builtins": {"_", "__", "___"}}
# sys: only these attributes are watched (sys holds plenty of legitimately changing state).
_SYS_KEYS = ("stdout", "stderr", "displayhook", "excepthook", "modules", "meta_path", "path_hooks")
# IPython machinery a submission could use to rewrite or swallow later cells.
_SHELL_KEYS = (
    "custom_exceptions",
    "CustomTB",
    "displayhook",
    "display_pub",
    "user_ns",
    "user_module",
    "compile",
    "events",
    "input_transformer_manager",
    "ast_transformers",
    "input_transformers_cleanup",
    "input_transformers_post",
    "display_trap",
    "builtin_trap",
)
_KERNEL_KEYS = (
    "shell",
    "session",
    "shell_handlers",
    "control_handler",
    "iopub_socket",
    "iopub_thread",
)
_TRUSTED_CALLBACK_MODULES = (
    "matplotlib",
    "matplotlib_inline",
    "IPython",
    "ipykernel",
    "ipywidgets",
)

_state: dict = {}


def _code_of(value):
    if isinstance(value, types.FunctionType):
        return (value.__code__, value.__defaults__, value.__kwdefaults__)
    return None


class _Namespace:
    """A dict-like namespace (module or class dict, or an instance's attributes) and its
    snapshot."""

    def __init__(self, label: str, owner, keys=None, strict_added: bool = False, skip=()):
        self.label, self.owner, self.strict_added = label, owner, strict_added
        self.skip = set(skip)
        current = self._dict()
        self.keys = (
            tuple(keys) if keys is not None else tuple(k for k in current if k not in self.skip)
        )
        self.values = {k: current.get(k, _MISSING) for k in self.keys}
        self.codes = {k: c for k, v in self.values.items() if (c := _code_of(v)) is not None}
        self.limited = keys is not None

    def _dict(self) -> dict:
        return vars(self.owner)

    def _set(self, key, value) -> None:
        if isinstance(self.owner, type):
            if value is _MISSING:
                delattr(self.owner, key)
            else:
                setattr(self.owner, key, value)
        elif value is _MISSING:
            self._dict().pop(key, None)
        else:
            self._dict()[key] = value

    def check(self, restore: bool) -> list[str]:
        found = []
        current = self._dict()
        for key, value in list(self.values.items()):
            now = current.get(key, _MISSING)
            if now is not value and library_wrapper(now, value):
                self.values[key] = now  # the library wrapped itself; watch the wrapper from now on
                if (code := _code_of(now)) is not None:
                    self.codes[key] = code
            elif now is not value:
                found.append(
                    f"{self.label}.{key} was replaced"
                    if now is not _MISSING
                    else f"{self.label}.{key} was deleted"
                )
                if restore:
                    self._set(key, value)
            elif key in self.codes and _code_of(value) != self.codes[key]:
                found.append(f"the code of {self.label}.{key} was replaced")
                if restore:
                    value.__code__, value.__defaults__, value.__kwdefaults__ = self.codes[key]
        if self.strict_added and not self.limited:
            for key in [k for k in current if k not in self.values and k not in self.skip]:
                if callable(current[key]) or isinstance(
                    current[key], (classmethod, staticmethod, property)
                ):
                    found.append(f"{self.label}.{key} was added")
                    if restore:
                        self._set(key, _MISSING)
        return found


def _callback_module(callback) -> str:
    func = getattr(callback, "__func__", callback)
    return getattr(func, "__module__", None) or ""


def _lists(shell) -> dict[str, list]:
    """IPython's lists of cell transformers and hooks, by name."""
    manager = shell.input_transformer_manager
    found = {
        "input_transformers_cleanup": shell.input_transformers_cleanup,
        "input_transformers_post": shell.input_transformers_post,
        "ast_transformers": shell.ast_transformers,
        "input_transformer_manager.cleanup_transforms": manager.cleanup_transforms,
        "input_transformer_manager.line_transforms": manager.line_transforms,
        "input_transformer_manager.token_transformers": manager.token_transformers,
    }
    for event, callbacks in shell.events.callbacks.items():
        found[f"events[{event!r}]"] = callbacks
    return found


def install(shell=None, kernel=None, extra_modules=()) -> str:
    """Snapshot everything the tests rely on; return the token that marks the guard's reports."""
    for name in ("attention_ref.np", "attention_ref.pt", "attention_ref.testing", *extra_modules):
        importlib.import_module(name)
    names = list(WATCHED_MODULES) + sorted(
        n for n in sys.modules if n == "attention_ref" or n.startswith("attention_ref.")
    )
    modules = {n: sys.modules[n] for n in names if n in sys.modules}
    spaces = [_Namespace(n, m, skip=_VOLATILE.get(n, ())) for n, m in modules.items()]
    spaces.append(_Namespace("sys", sys, keys=_SYS_KEYS))
    classes = {}
    for name in ("torch", "torch.nn"):
        for value in vars(modules[name]).values() if name in modules else ():
            # Classes written in Python (heap types) can be patched; built-in types cannot.
            if (
                isinstance(value, type)
                and value.__module__.startswith("torch")
                and value.__flags__ & (1 << 9)
            ):
                classes[f"{value.__module__}.{value.__qualname__}"] = value
    for obj in (shell, kernel, getattr(kernel, "session", None)):
        if obj is None:
            continue
        for cls in type(obj).__mro__[:-1]:
            classes[f"{cls.__module__}.{cls.__qualname__}"] = cls
    for label, cls in classes.items():
        spaces.append(
            _Namespace(label, cls, strict_added=True, skip=("__abstractmethods__", "_abc_impl"))
        )
    if shell is not None:
        spaces.append(_Namespace("get_ipython()", shell, keys=_SHELL_KEYS))
    if kernel is not None:
        spaces.append(_Namespace("get_ipython().kernel", kernel, keys=_KERNEL_KEYS))
    _state.clear()
    _state.update(
        token=secrets.token_hex(8),
        spaces=spaces,
        modules=modules,
        shell=shell,
        kernel=kernel,
        lists={k: list(v) for k, v in _lists(shell).items()} if shell is not None else {},
        trusted={},
        instance_methods={id(o): set(vars(o)) for o in (shell, kernel) if o is not None},
    )
    return _state["token"]


def trust(bindings: dict[str, list]) -> None:
    """Names the test cells use, as the lesson's own set-up imports them: ``{"np": ["numpy", None],
    "expect_close": ["attention_ref.testing", "expect_close"]}``. Called before any submitted code
    runs."""
    for name, (module, attr) in bindings.items():
        try:
            value = importlib.import_module(module)
            if attr is not None:
                value = getattr(value, attr)
        except Exception:  # noqa: BLE001 -- a module that cannot load in the sandbox is not trusted
            # in some other way (lesson 13's demos import `transformers`: trusting it stopped every
            # grading of the lesson). Trusting fewer names is the safe side; no grading stops here.
            continue
        _state["trusted"][name] = value


def _check_shell(restore: bool) -> list[str]:
    shell, found = _state["shell"], []
    if shell is None:
        return found
    current = _lists(shell)
    for label, before in _state["lists"].items():
        now = current.get(label)
        if now is None:
            continue
        added = [item for item in now if not any(item is b for b in before)]
        if label.startswith("events["):
            added = [
                cb for cb in added if not _callback_module(cb).startswith(_TRUSTED_CALLBACK_MODULES)
            ]
        if added:
            found.append(
                f"get_ipython().{label} got {len(added)} new "
                f"entr{'y' if len(added) == 1 else 'ies'}"
            )
            if restore:
                now[:] = [item for item in now if not any(item is a for a in added)]
    for obj in (shell, _state["kernel"]):
        if obj is None:
            continue
        methods = {k for cls in type(obj).__mro__ for k, v in vars(cls).items() if callable(v)}
        for key in [
            k for k in vars(obj) if k in methods and k not in _state["instance_methods"][id(obj)]
        ]:
            # an instance attribute that hides a method: a wrapper around run_cell, do_execute, ...
            found.append(
                f"{'get_ipython()' if obj is shell else 'get_ipython().kernel'}.{key} was "
                "overridden"
            )
            if restore:
                del vars(obj)[key]
    if sys.gettrace() is not None or sys.getprofile() is not None:
        found.append("a trace or profile function was installed (sys.settrace / sys.setprofile)")
        if restore:
            sys.settrace(None)
            sys.setprofile(None)
    return found


# IPython's output history: what a cell's last expression gave (Out, _oh, _, __, ___, _<N>), and
# (IPython 9) what it printed and displayed (history_manager.outputs, output_hist_reprs).
_UNDERS = ("_", "__", "___")
_NUMBERED = re.compile(r"_\d+")


def _is_output_name(name: str) -> bool:
    return name in _UNDERS or bool(_NUMBERED.fullmatch(name))


_HISTORY_DICTS = ("output_hist", "output_hist_reprs", "outputs")


def _copy_output(item):
    """A copy of an IPython ``HistoryOutput`` whose stream list a later cell may extend."""
    bundle = getattr(item, "bundle", None)
    if not isinstance(bundle, dict):
        return item
    bundle = {k: list(v) if isinstance(v, list) else v for k, v in bundle.items()}
    return type(item)(output_type=item.output_type, bundle=bundle)


def _output_history(shell) -> dict:
    """Everything of IPython's output history, as it is now (see :func:`_forget_outputs`)."""
    history = shell.history_manager
    kept = {name: getattr(history, name, None) for name in _HISTORY_DICTS}
    return {
        "output_hist": dict(kept["output_hist"] or {}),
        "output_hist_reprs": dict(kept["output_hist_reprs"] or {}),
        "outputs": {k: [_copy_output(o) for o in v] for k, v in (kept["outputs"] or {}).items()},
        "user_ns": {k: v for k, v in shell.user_ns.items() if _is_output_name(k)},
        "user_ns_hidden": {k: v for k, v in shell.user_ns_hidden.items() if _is_output_name(k)},
        "displayhook": {k: getattr(shell.displayhook, k, None) for k in _UNDERS},
    }


def _forget_outputs(shell, before: dict) -> None:
    """IPython's output history put back as it was before a test cell ran: test cells run without
    input history (coursekit.grading.autograder), and what they gave, printed or displayed is
    not kept for a later cell to read either (Out[n], _, history_manager.outputs)."""
    history = shell.history_manager
    for name in _HISTORY_DICTS:
        kept = getattr(history, name, None)  # output_hist is Out and _oh: changed in place
        if isinstance(kept, dict):
            kept.clear()
            kept.update(before[name])
    for name in ("user_ns", "user_ns_hidden"):
        space = getattr(shell, name)
        for key in [k for k in space if _is_output_name(k) and k not in before[name]]:
            del space[key]
        space.update(before[name])
    for key, value in before["displayhook"].items():
        setattr(shell.displayhook, key, value)


def check(restore: bool = True, test_cell: bool = False) -> str:
    """What was changed since :func:`install` (put back when ``restore``), as JSON with the
    token. After a ``test_cell``, IPython's output history is put back as it was before the
    cell (the last check's)."""
    shell = _state["shell"]
    if shell is not None and test_cell and "outputs" in _state:
        _forget_outputs(shell, _state["outputs"])
    found: list[str] = []
    for space in _state["spaces"]:
        found += space.check(restore)
    for name, module in _state["modules"].items():
        if sys.modules.get(name) is not module:
            found.append(f"sys.modules[{name!r}] was replaced")
            if restore:
                sys.modules[name] = module
    found += _check_shell(restore)
    if shell is not None:
        namespace = shell.user_ns
        for name, value in _state["trusted"].items():
            now = namespace.get(name, _MISSING)
            if now is not _MISSING and now is not value:
                found.append(
                    f"the notebook's name {name!r} no longer refers to what the lesson imports"
                )
                if restore:
                    namespace[name] = value
    # what the sandbox's audit hook refused since the last check
    blocked = _state.get("blocked", [])
    report = {"token": _state["token"], "tampered": found, "blocked": list(dict.fromkeys(blocked))}
    blocked.clear()
    if shell is not None:
        _state["outputs"] = _output_history(shell)  # as it is before the next cell
    return json.dumps(report)
