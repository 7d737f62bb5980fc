"""The graph layer: a typed dataflow IR of whole models, imported from ONNX or written with
``Builder``, compiled by ``build`` into a ``runtime.GraphModule``.

    from tensorlang import graph
    g = graph.from_onnx("model.onnx")
    gm = graph.build(g, target="llvm")
    out = gm.run(x=x)
"""

from .build import BuildError, BuildReport, build, workload_key
from .builder import Builder
from .flush_calibration import FlushCalibration, calibrate_flush
from .frontends.onnx import OnnxImportError, UnsupportedOperatorError, from_onnx
from .in_model import InModelChoice, remeasure_in_model
from .ir import Graph, GraphError, Node, Value, topo_sort
from .op_registry import OPS
from .tasks import extract_tasks

__all__ = [
    "OPS",
    "BuildError",
    "BuildReport",
    "Builder",
    "FlushCalibration",
    "Graph",
    "GraphError",
    "InModelChoice",
    "Node",
    "OnnxImportError",
    "UnsupportedOperatorError",
    "Value",
    "build",
    "calibrate_flush",
    "extract_tasks",
    "from_onnx",
    "remeasure_in_model",
    "topo_sort",
    "workload_key",
]
