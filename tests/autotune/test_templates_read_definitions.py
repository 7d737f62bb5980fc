"""The built-in templates read the definition of the op they tune (issue 17): its compute, and
the knobs its anchor schedule declares, whose defaults are the fallback config's."""

import dataclasses

import pytest
from tensorlang.autotune import templates as TT

from tensorlang import autotune

BUILTIN = ("matmul", "dense", "batch_matmul", "conv2d_nchwc", "depthwise_conv2d")


@pytest.mark.parametrize("name", BUILTIN)
def test_each_builtin_template_tunes_the_op_declaring_it(name):
    d = TT._tuned_op(name)
    assert d.template == name and d.anchor is not None


def test_a_template_no_definition_declares_is_refused():
    with pytest.raises(LookupError, match="no operator definition declares template='nope'"):
        TT._tuned_op("nope")


def _fallback(name: str, args: tuple) -> dict:
    space = autotune.create_task(name, args).config_space
    return {k: e.val for k, e in space.get(space.fallback_index()).entities.items()}


def test_fallback_configs_are_the_declared_defaults():
    for name in ("matmul", "dense", "batch_matmul"):
        declared = TT._tuned_op(name).anchor
        args = (2, 60, 96, 128, "float32") if name == "batch_matmul" else (60, 96, 128, "float32")
        cfg = _fallback(name, args)
        for knob in ("k_outer", "unroll_rows", "rows_outer", "parallel"):
            assert cfg[knob] == declared.knob(knob).default, (name, knob)
        assert cfg["tile_m"] == declared.knob("tile_m").default  # 6 divides 60 rows
    conv = TT._tuned_op("conv2d_nchwc").anchor
    cfg = _fallback("conv2d_nchwc", (1, 32, 14, 14, 32, 3, 3, 1, 1, 16, "float32"))
    assert (cfg["reg_n"], cfg["oc_vec"], cfg["unroll_kw"]) == (
        conv.knob("reg_n").default, conv.knob("oc_blocks").default,
        int(conv.knob("unroll_kw").default))
    window = TT._tuned_op("depthwise_conv2d").anchor
    cfg = _fallback("depthwise_conv2d", (1, 16, 18, 18, 3, 3, 1, 1, "float32"))
    assert (cfg["rows"], cfg["row_lanes_max"], cfg["parallel"]) == (
        window.knob("rows").default, window.knob("row_lanes_max").default,
        int(window.knob("parallel").default))


def test_a_declared_default_moves_the_templates_fallback(monkeypatch):
    """With the depthwise op's declared row_lanes_max default at 16 (a stand-in definition),
    the template's fallback takes it: the template reads the declaration, not a copy."""
    real = TT._tuned_op("depthwise_conv2d")
    knobs = tuple(dataclasses.replace(k, default=16) if k.name == "row_lanes_max" else k
                  for k in real.anchor.knobs)
    stand_in = dataclasses.replace(real, schedule=dataclasses.replace(real.anchor, knobs=knobs))
    monkeypatch.setattr(TT, "_tuned_op", lambda name: stand_in)
    cfg = _fallback("depthwise_conv2d", (1, 16, 18, 18, 3, 3, 1, 1, "float32"))
    assert cfg["row_lanes_max"] == 16
