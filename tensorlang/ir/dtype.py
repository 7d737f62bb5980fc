"""Data types are plain strings, as in numpy and TVM: "float32", "int64", "bool", and with a lane
count for vectors: "float32x16". Strings serialize to JSON for free; these helpers parse them."""

from __future__ import annotations

from functools import cache

import numpy as np

SCALAR_DTYPES = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64",
)
INDEX_DTYPE = "int64"


@cache
def _parse(dtype: str) -> tuple[str, int]:
    base, sep, lanes = dtype.partition("x")
    if base not in SCALAR_DTYPES or (sep and not lanes.isdigit()):
        raise TypeError(f"unknown dtype {dtype!r}; expected one of {', '.join(SCALAR_DTYPES)}")
    return base, int(lanes) if sep else 1


def canonical(dtype) -> str:
    """Accept a dtype string, a numpy dtype or a numpy scalar type; return the canonical string."""
    if isinstance(dtype, str):
        _parse(dtype)
        return dtype
    try:
        name = np.dtype(dtype).name
    except TypeError:
        raise TypeError(f"unknown dtype {dtype!r}; expected one of {', '.join(SCALAR_DTYPES)}")
    _parse(name)
    return name


def element(dtype: str) -> str:
    return _parse(dtype)[0]


def lanes(dtype: str) -> int:
    return _parse(dtype)[1]


def with_lanes(dtype: str, n: int) -> str:
    base = element(dtype)
    return base if n == 1 else f"{base}x{n}"


def is_float(dtype: str) -> bool:
    return element(dtype).startswith("float")


def is_bool(dtype: str) -> bool:
    return element(dtype) == "bool"


def is_int(dtype: str) -> bool:
    """Signed or unsigned integer (not bool)."""
    return element(dtype).startswith(("int", "uint"))


def is_unsigned(dtype: str) -> bool:
    return element(dtype).startswith("uint")


def bits(dtype: str) -> int:
    base = element(dtype)
    return 1 if base == "bool" else int(base.lstrip("floatuin"))


def storage_bytes(dtype: str) -> int:
    """Bytes one element occupies in memory (bool is a byte, as in numpy)."""
    return max(1, bits(dtype) // 8) * lanes(dtype)


def promote(a: str, b: str) -> str:
    """The dtype two operands are computed in (numpy-like: float beats int, wider beats narrower)."""
    ea, eb = element(a), element(b)
    if ea == eb:
        return ea
    if is_float(ea) != is_float(eb):
        # float beats int whatever the int's width (as in TVM and PyTorch, unlike numpy):
        # `A[i] * i` with a float32 A and an int64 loop index stays float32, not float64
        return ea if is_float(ea) else eb
    return np.promote_types(ea, eb).name


@cache  # numpy's iinfo costs microseconds, and every integer constant checks its range
def limits(dtype: str) -> tuple[float | int, float | int]:
    """(lowest, highest) finite-or-infinite values, used as reduction identities."""
    base = element(dtype)
    if base == "bool":
        return False, True
    if is_float(base):
        return -float("inf"), float("inf")
    info = np.iinfo(base)
    return int(info.min), int(info.max)
