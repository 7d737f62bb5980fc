"""Operators tensorlang has no converter for, imported through their ONNX function bodies.

The ONNX specification defines many operators as functions of others: a fixed body (Swish,
Mish, Shrink, Celu...) or one built for the node's attributes and input types (Attention,
RMSNormalization, RotaryEmbedding, Gelu, the losses...). A node of such an operator is imported
as its body's nodes, each through its own converter, so an exporter's newer operators (torch
writes Attention and RMSNormalization at opset 23) import without a converter of their own.
The body is imported at the opset it was written for, in a scope of its own: it reads only its
formal inputs, and an optional input the node leaves out is left out of the body's nodes too.
"""

from __future__ import annotations

from .onnx_context import UNKNOWN, OnnxImportError, _Ctx, _sanitize, _Scope


def expand_function(ctx: _Ctx, n, ins: list) -> list | None:
    """The values of node ``n``'s outputs computed by its operator's function body, or None
    when the operator has no body at the model's opset. Raises OnnxImportError naming the
    body's nodes that could not be imported."""
    import onnx.defs

    try:
        schema = onnx.defs.get_schema(n.op_type, ctx.opset, "")
    except onnx.defs.SchemaError:
        return None
    check = _REQUIREMENTS.get(n.op_type)
    if check is not None:
        check(ctx, n, ins)
    body = _function_body(schema, ctx.opset, n, ins)
    if body is None:
        return None
    scope = _Scope()
    for formal, v in zip(body.input, ins):
        if v is not None:
            scope.set(formal, v)
    sub = ctx.child(scope)
    sub.opset = next((imp.version for imp in body.opset_import if imp.domain in ("", "ai.onnx")),
                     ctx.opset)
    sub.unsupported, sub.refused = [], []
    missing = {formal for formal, v in zip(body.input, ins) if v is None}
    missing |= set(body.input[len(ins):])
    attrs = _attribute_values(schema, body, n)
    from .onnx import import_nodes  # (onnx.py imports this module)

    import_nodes(sub, [_instantiate(node, attrs, missing, ctx.node_name, j)
                       for j, node in enumerate(body.node)])
    if sub.unsupported or sub.refused:
        inner = [f"{op} ({why})" for op, _, _, why in sub.refused]
        inner += [f"{e[0]} (no converter)" for e in sub.unsupported]
        raise OnnxImportError(
            f"node {ctx.node_name!r} ({n.op_type}, opset {ctx.opset}): tensorlang has no "
            f"converter for {n.op_type} and its ONNX function body (opset {sub.opset}) does not "
            "import: " + "; ".join(inner))
    return [scope.get(o) if o in scope else UNKNOWN for o in body.output][:len(n.output)]


def _attention_heads(ctx: _Ctx, n, ins: list) -> None:
    """Attention's 3-D inputs [B, S, heads * D] need q_num_heads and kv_num_heads (the spec;
    its function body, built without them, fails deep inside on shapes that do not match)."""
    given = {a.name for a in n.attribute}
    if any(v is not None and len(v.shape) == 3 for v in ins[:3]) and \
            not {"q_num_heads", "kv_num_heads"} <= given:
        raise OnnxImportError(f"node {ctx.node_name!r} (Attention, opset {ctx.opset}): 3-D "
                              "inputs [batch, sequence, heads * head size] need the q_num_heads "
                              "and kv_num_heads attributes")


# what an operator's specification requires that its function body's builder does not check
_REQUIREMENTS = {"Attention": _attention_heads}


def _function_body(schema, opset: int, n, ins: list):
    """The FunctionProto of ``n``'s operator at ``opset``: the one built for this node when the
    body depends on its attributes and input types, else the fixed one; None without one."""
    from onnx import FunctionProto

    body = FunctionProto()
    if schema.has_context_dependent_function:
        types = [_type_proto(v).SerializeToString() for v in ins]
        data = schema.get_context_dependent_function(n.SerializeToString(), types)
        if not data:
            return None
        body.ParseFromString(data)
        return body
    if not schema.has_function:
        return None
    fitting = [v for v in schema.function_opset_versions if v <= opset]
    if fitting:
        body.ParseFromString(schema.get_function_with_opset_version(max(fitting)))
        return body
    return schema.function_body


def _attribute_values(schema, body, caller) -> dict:
    """Attribute name -> AttributeProto for the body's references: the caller's, else the
    body's default, else the schema's."""
    out = {name: a.default_value for name, a in schema.attributes.items()
           if a.default_value.name}
    out.update({a.name: a for a in body.attribute_proto})
    out.update({a.name: a for a in caller.attribute})
    return out


def _type_proto(v):
    """The ONNX type of an input (an empty one for an input left out); symbolic dimensions by
    name."""
    import numpy as np
    from onnx import TypeProto, helper

    if v is None:
        return TypeProto()
    dims = [d if isinstance(d, int) else str(d) for d in v.shape]
    return helper.make_tensor_type_proto(
        helper.np_dtype_to_tensor_dtype(np.dtype(str(v.dtype))), dims)


def _instantiate(node, attrs: dict, missing: set[str], outer: str, j: int):
    """A copy of body node ``node`` for this call: attributes that refer to the caller's take
    their values (left out when there is none), the left-out optional inputs are empty, and
    the name says which node it expands."""
    from onnx import NodeProto

    out = NodeProto()
    out.CopyFrom(node)
    out.name = _sanitize(f"{outer}/{node.name or f'{node.op_type}_{j}'}")
    del out.input[:]
    out.input.extend("" if x in missing else x for x in node.input)
    del out.attribute[:]
    for a in node.attribute:
        src = attrs.get(a.ref_attr_name) if a.ref_attr_name else a
        if src is not None:
            new = out.attribute.add()
            new.CopyFrom(src)
            new.name = a.name
    return out
