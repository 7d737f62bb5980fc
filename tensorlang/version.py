"""The tensorlang version, in a dependency-free module so that the runtime (which must not
import the compiler) and the compiler's caches can both read it. Keep in step with setup.cfg."""

__version__ = "0.1.0"


def version_major(version: str) -> int:
    """The major component of a version string such as "0.1.0"."""
    head = version.split(".", 1)[0]
    if not head.isdigit():
        raise ValueError(f"not a version string: {version!r}")
    return int(head)
