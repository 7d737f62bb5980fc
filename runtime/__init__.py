"""What runs compiled code: kernel modules (checked calls on numpy arrays), timing, the thread
pool, and artifacts that load without the compiler.

This package imports only numpy, ctypes and the standard library (llvmlite lazily, for
fallbacks), and from tensorlang only its dependency-free ``errors`` and ``version`` modules, so
that deployed code runs without the compiler.
"""

from .arrays import array, empty
from .convert import convert
from .device import enabled
from .extern_c import load_library
from .graph_module import GraphModule, InputError, load
from .module import ArtifactError, KernelError, LoadError, Module, load_module
from .threadpool import bind_threads, get_num_threads, set_num_threads, unbind_threads
from .timer import TimingResult

__all__ = [
    "ArtifactError",
    "GraphModule",
    "InputError",
    "KernelError",
    "LoadError",
    "Module",
    "TimingResult",
    "array",
    "bind_threads",
    "convert",
    "empty",
    "enabled",
    "get_num_threads",
    "load",
    "load_library",
    "load_module",
    "set_num_threads",
    "unbind_threads",
]
