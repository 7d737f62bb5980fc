"""The thread pool's LLVM IR text, read from the ``.ll`` resources in ``runtime/ir``.

The pool is hand-written IR kept in resource files (not Python strings) so that it is reviewed,
diffed and parsed as IR: ``threadpool.ll`` (the protocol, architecture-neutral),
``pool_<machine>.ll`` (the spin-wait hint and the clock of the spin budgets) and ``timing.ll``
(the native timing loop). The module compiled is their concatenation in that order, after the
integer parameters of ``threadpool.ll`` are filled (see its header and ``fill_template``).

Nothing here imports llvmlite: the text is only hashed (the cache key of the compiled library)
until a machine without a cached copy compiles it.
"""

from __future__ import annotations

import functools
import hashlib
import platform
import re
from pathlib import Path

MAX_THREADS = 256
# Spin for about 100 us at 2-4 GHz before sleeping: long enough that back-to-back launches from
# an op-by-op executor find the workers awake, short enough not to steal a shared core for long.
DEFAULT_SPIN_CYCLES = 300_000
# The first ~2 us of a wait only execute pause hints; after that each step is a sched_yield, so
# that a thread we wait for that shares our CPU (an oversubscribed machine) gets to run.
PURE_SPIN_CYCLES = 5_000
# The highest kernel arity timing.ll has a loop for (@tl_time_calls_0 .. _32).
MAX_TIMED_ARGS = 32

# machine -> (futex syscall number, gettid syscall number); the rest of what differs between
# architectures is IR, in pool_<machine>.ll.
SYSCALLS = {"x86_64": (202, 186), "aarch64": (98, 178)}

IR_DIR = Path(__file__).resolve().parent / "ir"
# A template parameter: @NAME@ with NAME in capitals. LLVM's own global names in these files
# are lower-case (@tl_slots, @llvm.memcpy...), so the two never collide.
_PARAMETER = re.compile(r"@([A-Z][A-Z0-9_]*)@")


class PoolIRError(RuntimeError):
    """The pool's IR resources are missing or do not match the parameters given to them."""


def machine() -> str:
    """This machine's architecture under the names the pool knows (x86_64, aarch64, ...)."""
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)


@functools.cache
def read_resource(name: str) -> str:
    """The text of ``runtime/ir/<name>``, read once per process."""
    path = IR_DIR / name
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PoolIRError(
            f"the thread pool's IR resource {path} is missing: the installation is incomplete "
            "(runtime/ir/*.ll must be installed as package data)"
        ) from None


def template_parameters(text: str) -> set[str]:
    """The names of the @NAME@ parameters a template uses."""
    return set(_PARAMETER.findall(text))


def fill_template(text: str, values: dict[str, int]) -> str:
    """``text`` with every @NAME@ replaced by ``values[NAME]``.

    Values are integers only (sizes, counts, syscall numbers): IR never travels through a
    parameter. A parameter without a value, or a value for a parameter the text does not use,
    is an error, so a template and its caller cannot drift apart silently.
    """
    used = template_parameters(text)
    missing, unused = used - values.keys(), values.keys() - used
    if missing or unused:
        raise PoolIRError(
            f"IR template parameters do not match: no value for {sorted(missing)}, "
            f"values for unknown {sorted(unused)}"
        )
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise PoolIRError(f"IR template parameter {name} must be an int, got {value!r}")
    return _PARAMETER.sub(lambda m: str(values[m.group(1)]), text)


def pool_parameters(machine_name: str) -> dict[str, int]:
    """The values of threadpool.ll's parameters on ``machine_name``."""
    futex, gettid = SYSCALLS[machine_name]
    return {
        "MAXW": MAX_THREADS,
        "SLOTBYTES": MAX_THREADS * 64,
        "TIDBYTES": MAX_THREADS * 8,
        "SPIN": DEFAULT_SPIN_CYCLES,
        "PURE_SPIN": PURE_SPIN_CYCLES,
        "SYS_FUTEX": futex,
        "SYS_GETTID": gettid,
    }


def pool_ir(machine_name: str | None = None) -> str:
    """The pool's LLVM IR text for ``machine_name`` (default: this machine)."""
    machine_name = machine_name or machine()
    if machine_name not in SYSCALLS:
        raise RuntimeError(f"the tensorlang thread pool does not support {machine_name!r} yet")
    core = fill_template(read_resource("threadpool.ll"), pool_parameters(machine_name))
    return core + read_resource(f"pool_{machine_name}.ll") + read_resource("timing.ll")


def pool_key() -> str:
    """Content hash naming this machine's compiled pool in the cache."""
    return hashlib.sha256((pool_ir() + "\0" + machine()).encode()).hexdigest()[:24]
