"""Saving never destroys what the user had at the path: a model folder replaces only a model
saved there before (or an empty folder), a kernel file is not written over a folder, and
records are appended only to a tuning log."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from onnx import TensorProto, helper

import tensorlang as tl
from tensorlang import autotune, graph, runtime


@pytest.fixture(scope="module")
def relu_model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    return graph.build(graph.from_onnx(model))


def test_a_user_folder_or_file_is_not_replaced_by_a_saved_model(tmp_path, relu_model):
    mine = tmp_path / "thesis"
    (mine / "sub").mkdir(parents=True)
    (mine / "thesis.txt").write_text("years of work")
    with pytest.raises(FileExistsError, match="is a folder that tensorlang did not save: not "
                                              "replaced"):
        relu_model.save(mine)
    assert (mine / "thesis.txt").read_text() == "years of work"
    notes = tmp_path / "notes.txt"
    notes.write_text("notes")
    with pytest.raises(FileExistsError, match="notes.txt is a file: not replaced"):
        relu_model.save(notes)
    assert notes.read_text() == "notes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "thesis"]  # no tmp left
    # a path that cannot be a folder: the error names it, not the temporary folder beside it
    with pytest.raises(NotADirectoryError) as e:
        relu_model.save(notes / "model")
    assert e.value.filename == str(notes / "model")


def test_a_saved_model_or_an_empty_folder_is_replaced(tmp_path, relu_model):
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    for path in (tmp_path / "empty", tmp_path / "model"):
        path.mkdir()
        relu_model.save(path)
        relu_model.save(path)  # over the model saved there
        np.testing.assert_array_equal(runtime.load(path).run(x=x)["y"], np.maximum(x, 0))


def test_a_kernel_is_not_saved_over_a_folder(tmp_path):
    a = tl.placeholder((4,), name="A")
    b = tl.compute((4,), lambda i: a[i] + 1, name="B")
    f = tl.build(tl.create_schedule(b), [a, b])
    (tmp_path / "k").mkdir()
    with pytest.raises(IsADirectoryError, match=r"k is a folder: a kernel saves to one file, "
                                                r"e.g. .*k/kernel.tlm"):
        f.save(tmp_path / "k")
    assert list(tmp_path.iterdir()) == [tmp_path / "k"]
    # nor over a file it did not save (a model, data: was replaced), nor a device or a fifo
    # (/dev/null as root: replaced by a zip); a kernel saved before or an empty file is
    x = tmp_path / "x.npy"
    np.save(x, np.arange(3))
    os.mkfifo(tmp_path / "fifo")
    for path, what in ((x, "a file that tensorlang did not save"),
                       (tmp_path / "fifo", "not a regular file")):
        with pytest.raises(FileExistsError, match=f"{path.name} is {what}: not replaced"):
            f.save(path)
    np.testing.assert_array_equal(np.load(x), np.arange(3))
    for path in (tmp_path / "k.tlm", tmp_path / "empty.tlm"):
        path.touch()
        f.save(path)
        f.save(path)  # over the kernel saved there
        assert runtime.load_module(path).name == f.name


def _record_line() -> str:
    task = autotune.create_task("matmul", (4, 4, 4, "float32"))
    res = autotune.MeasureResult([1e-6], None, "", 0.1, 1.0, None)
    return autotune.record.make_record(autotune.MeasureInput(task, task.config(0)),
                                       res).dumps()


@pytest.mark.parametrize("content, message", [
    (b"ONNX\x08\x07\x12\x00\x1a\x05graph", "it holds binary data"),
    (b"\xff\xfe\xfdnot utf-8\n", "it holds binary data"),
    (b"my notes\nmore notes\n", "none of its first 2 lines is a JSON record"),
])
def test_records_are_not_appended_to_a_file_that_is_not_a_log(tmp_path, content, message):
    path = tmp_path / "file"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=rf"is not a tuning log \({message}\): records are not "
                                         "appended"):
        autotune.log_to_file(path)
    assert path.read_bytes() == content


@pytest.mark.parametrize("content", ["", "\n", "RECORD\n", "RECORD\nRECORD\n{\"workl",
                                     "garbage line\nRECORD\n"])
def test_a_log_new_empty_or_with_a_cut_or_corrupt_line_is_appended_to(tmp_path, content):
    path = tmp_path / "t.jsonl"
    path.write_text(content.replace("RECORD", _record_line()))
    autotune.log_to_file(path)
    autotune.log_to_file(tmp_path / "new.jsonl")


def test_a_line_nested_too_deep_is_skipped_as_corrupt(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(_record_line() + "\n" + "[" * 200_000 + "]" * 200_000 + "\n")
    with pytest.warns(UserWarning, match=r"line 2: not a record \(JSON nested too deep\)"):
        assert len(autotune.load_records(path)) == 1


@pytest.mark.parametrize("name", ["plan.json", "manifest.json"])
def test_an_artifact_file_nested_too_deep_is_an_artifact_error(tmp_path, relu_model, name):
    path = relu_model.save(tmp_path / "m")
    (path / name).write_text("[" * 100_000)
    if name == "plan.json":  # recorded as the manifest's: only the nesting is wrong
        import hashlib
        manifest = json.loads((path / "manifest.json").read_text())
        manifest["files"][name] = hashlib.sha256((path / name).read_bytes()).hexdigest()
        (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(runtime.ArtifactError, match=rf"{name}: corrupt JSON \(nested too deep\)"):
        runtime.load(path)
