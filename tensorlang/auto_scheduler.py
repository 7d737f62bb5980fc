"""``import tensorlang.auto_scheduler`` and ``from tensorlang import auto_scheduler`` (TVM's
``from tvm import auto_scheduler``): the module is ``tensorlang.graph.auto_scheduler``, which
takes whole graphs and so lives in the graph layer; this file makes the package's name for it
that same module object (not a copy of its names)."""

import sys

from tensorlang.graph import auto_scheduler as _module

sys.modules[__name__] = _module
