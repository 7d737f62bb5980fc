"""``tvm.target`` (``tl.target``): ``Target("llvm ...")`` as TVM scripts write it.

A Target here is the target string itself (a ``str`` subclass), so every call that takes
``target="llvm"`` takes it: ``tl.build(s, args, tgt)``, ``autotune.create_task(...,
target=tgt)``, ``auto_scheduler.SearchTask(..., target=tgt)``. It adds TVM's ``.kind.name``
(``tl.device(tgt.kind.name, 0)``), ``.host``, ``.attrs`` and the ``with Target(...):`` scope,
inside which ``tl.build`` without a target builds for it. The one kind is ``llvm`` (the host
CPU, or another x86-64 CPU with ``-mcpu=``); GPU kinds and the C source backend are refused by
name."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Self

_GPU_KINDS = ("cuda", "nvptx", "rocm", "opencl", "vulkan", "metal", "webgpu", "hexagon")
_scopes = threading.local()


class Target(str):
    """TVM's ``tvm.target.Target(target, host=None)``: the ``llvm`` target string."""

    def __new__(cls, target="llvm", host=None):
        if isinstance(target, dict):
            raise TypeError("Target: a dict target is not supported: pass the string, e.g. "
                            "Target('llvm -mcpu=skylake-avx512')")
        if not isinstance(target, str):
            raise TypeError(f"Target: expected a string such as 'llvm', got "
                            f"{type(target).__name__}")
        spec = " ".join(target.split())
        _check_kind(spec, "target")
        if host is not None:
            if not isinstance(host, str):
                raise TypeError(f"Target: host must be a string such as 'llvm', got "
                                f"{type(host).__name__}")
            _check_kind(" ".join(host.split()), "host")
        self = super().__new__(cls, spec)
        opts = dict(tok.split("=", 1) for tok in spec.split()[1:] if "=" in tok)
        self.kind = SimpleNamespace(name="llvm")
        self.attrs = {k.lstrip("-"): v for k, v in opts.items()}
        self.host = None if host is None or host == target else Target(host)
        return self

    def __repr__(self) -> str:
        return f"Target({str(self)!r})"

    def __enter__(self) -> Self:
        stack = getattr(_scopes, "stack", None)
        if stack is None:
            stack = _scopes.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _scopes.stack.pop()

    @staticmethod
    def current(allow_none: bool = True) -> Target | None:
        """The innermost ``with Target(...)`` scope's target (None outside one)."""
        stack = getattr(_scopes, "stack", None)
        if stack:
            return stack[-1]
        if not allow_none:
            raise ValueError("Target.current: no target scope is active")
        return None


def _check_kind(spec: str, what: str) -> None:
    kind = spec.split(" ", 1)[0] if spec else ""
    if kind == "llvm":
        return
    if kind in _GPU_KINDS:
        raise ValueError(f"Target({spec!r}): {kind} is a GPU target; tensorlang compiles for "
                         "the host CPU only: use 'llvm' (with -mcpu=... for another x86-64 CPU)")
    if kind == "c":
        raise ValueError(f"Target({spec!r}): the C source backend is not supported: the one "
                         "target is 'llvm' (f.get_source('ll') / 'asm' show the code)")
    raise ValueError(f"Target({spec!r}): unknown {what} kind {kind!r}: the one kind is 'llvm'")


def __getattr__(name: str):
    text = f"module 'tensorlang.target' has no attribute {name!r}"
    if name.startswith("_"):
        raise AttributeError(text)
    raise AttributeError(f"{text}: tvm.target.{name}: the target is a string, "
                         "Target('llvm -mcpu=<cpu> -mattr=+f,-g'), for the host CPU or another "
                         "x86-64 CPU (GPU and other targets are not supported)")
