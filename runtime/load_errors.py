"""The errors of loading compiled code, shared by the kernel loader (``module``), the kernel
artifact format (``kernel_artifact``) and the model artifact (``graph_module``)."""

from __future__ import annotations

from tensorlang.errors import TensorlangError


class LoadError(TensorlangError):
    """Object code that cannot be loaded (link failure, missing symbol, unusable library)."""


class ArtifactError(LoadError):
    """A saved module refused at load: wrong format, version, architecture or CPU features."""
