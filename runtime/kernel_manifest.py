"""A kernel's manifest: what its arguments are, checked before any code is loaded.

``{"name", "symbol", "args": [{"name", "shape", "dtype", "written"}], "vars",
"target": {"cpu", "features", "triple"}, "version", "error_messages"}``, optionally
``"call_order"`` and ``"var_dtypes"`` ({var: "float16" | "float32" | "float64"}: the float scalar
parameters; a var not listed is an int64). A dimension is an int, the name of one of ``vars``, or an expression of them
(``"n - 2"``). The checked call trusts this description, so a malformed one is refused
(ValueError naming the field) rather than half-used.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from tensorlang.version import __version__

from ._dims import DimError, DimExpr

_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_.$]*")


def _require(cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(f"invalid kernel manifest: {msg}")


def _is_kernel_dtype(name: Any) -> bool:
    """A dtype name the kernels take: bool, integer or floating point (never object, strings,
    structured or unknown names, which ``np.dtype`` would also accept or turn into float64)."""
    if not isinstance(name, str):
        return False
    try:
        return np.dtype(name).kind in "biuf"
    except TypeError:
        return False


def _check_dim_expr(arg: str, text: str, vars_: list[str]) -> None:
    _require(not text.isidentifier(), f"argument {arg!r}: dimension {text!r} is not in vars")
    try:
        DimExpr(text, vars_)
    except DimError as e:
        _require(False, f"argument {arg!r}: {e}")


def _check_call_order(order: Any, arg_names: list[str], vars_: list[str]) -> None:
    """The optional 'call_order': the positional call's names, every array argument in
    'args' order with shape variables (scalars) among them, each name once. Manifests
    without it (older ones) take the arrays positionally and the variables by keyword."""
    _require(isinstance(order, list) and all(isinstance(n, str) for n in order),
             "'call_order' must be a list of names")
    _require(len(set(order)) == len(order), f"duplicate names in call_order {order}")
    _require([n for n in order if n in arg_names] == arg_names,
             f"'call_order' {order} must list the arguments {arg_names} in order")
    _require(all(n in arg_names or n in vars_ for n in order),
             f"'call_order' {order} names something neither an argument nor in vars")


# The dtypes a scalar parameter (a var) may have besides int64, the default: float ones,
# passed through the ABI's int64 as their IEEE-754 bit pattern (runtime.module.scalar_bits).
SCALAR_FLOAT_DTYPES = ("float16", "float32", "float64")


def _check_var_dtypes(var_dtypes: Any, vars_: list[str]) -> None:
    """The optional 'var_dtypes': {var name: float dtype} for the float scalar parameters
    (tl.var("bias", dtype="float32")); a var it does not list is an int64 (manifests from
    before float scalars have none)."""
    _require(isinstance(var_dtypes, Mapping), "'var_dtypes' must map var names to dtypes")
    for name, d in var_dtypes.items():
        _require(name in vars_, f"'var_dtypes' names {name!r}, which is not in vars")
        _require(d in SCALAR_FLOAT_DTYPES or d == "int64",
                 f"var {name!r} has dtype {d!r}: a scalar parameter is int64 or one of "
                 f"{', '.join(SCALAR_FLOAT_DTYPES)}")


def normalize_manifest(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """Check a manifest's structure and return a JSON-clean deep copy of it."""
    _require(isinstance(manifest, Mapping), f"expected a dict, got {type(manifest).__name__}")
    m = copy.deepcopy(dict(manifest))
    for key in ("name", "symbol"):
        _require(isinstance(m.get(key), str) and m[key], f"{key!r} must be a non-empty string")
    _require(_SYMBOL.fullmatch(m["symbol"]) is not None,
             f"'symbol' {m['symbol']!r} is not a C identifier")
    _require(isinstance(m.get("args"), list), "'args' must be a list")
    m.setdefault("vars", [])
    _require(
        isinstance(m["vars"], list) and all(isinstance(v, str) and v for v in m["vars"]),
        "'vars' must be a list of names",
    )
    _require(len(set(m["vars"])) == len(m["vars"]), f"duplicate names in vars {m['vars']}")
    if "var_dtypes" in m:
        _check_var_dtypes(m["var_dtypes"], m["vars"])
    # a float scalar parameter is never a dimension
    int_vars = [v for v in m["vars"] if m.get("var_dtypes", {}).get(v, "int64") == "int64"]
    names = set()
    for i, a in enumerate(m["args"]):
        _require(isinstance(a, Mapping), f"args[{i}] must be a dict")
        name = a.get("name")
        _require(isinstance(name, str) and name, f"args[{i}] needs a name")
        _require(name not in names, f"duplicate argument name {name!r}")
        names.add(name)
        _require(_is_kernel_dtype(a.get("dtype")),
                 f"argument {name!r} has unknown dtype {a.get('dtype')!r} (expected the name "
                 "of a bool, integer or floating-point dtype)")
        shape = a.get("shape")
        _require(isinstance(shape, (list, tuple)), f"argument {name!r} needs a shape list")
        for d in shape:
            if isinstance(d, str):
                if d not in m["vars"]:
                    _check_dim_expr(name, d, int_vars)
                else:
                    _require(d in int_vars, f"argument {name!r}: dimension {d!r} is a float "
                             "scalar parameter, not a size")
            else:
                _require(
                    isinstance(d, int) and not isinstance(d, bool) and d >= 0,
                    f"argument {name!r}: dimension {d!r} must be a var name or an int >= 0 "
                    "(or an expression of vars such as 'n - 2')",
                )
        a["shape"] = list(shape)
        a["written"] = bool(a.get("written", False))
    if "call_order" in m:
        _check_call_order(m["call_order"], [a["name"] for a in m["args"]], m["vars"])
    target = m.get("target", {})
    _require(isinstance(target, Mapping), "'target' must be a dict")
    m["target"] = {
        "cpu": str(target.get("cpu", "")),
        "features": str(target.get("features", "")),
        "triple": str(target.get("triple", "")),
    }
    m.setdefault("version", __version__)
    errors = m.get("error_messages", {})
    _require(isinstance(errors, Mapping), "'error_messages' must map codes to messages")
    m["error_messages"] = {str(k): str(v) for k, v in errors.items()}
    return m
