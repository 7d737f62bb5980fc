"""No LLVM IR as Python string literals in the packages (issue 17): machine code is written with
llvmlite's IR builder (codegen, the graph driver) or kept in .ll resources that LLVM parses and
tests verify (runtime/ir). Tests and benchmarks may hold small IR texts of their own."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tensorlang", "runtime", "graph", "autotune")
# file -> why it still formats IR text
ALLOWED = {
    "tensorlang/codegen/_cpu_probe.py": "the CPU-feature probe: one tiny function per feature, "
    "run in a throwaway process (left for the codegen owner)",
}
_IR = re.compile(
    r"(?m)^\s*(define|declare)\b[^\n]*@"
    r"|%[\w.]+ = (add|sub|mul|load|call|getelementptr|icmp|fcmp|phi|alloca|select)\b"
    r"|\bret (void|i\d+|ptr|float|double)\b"
    r"|\bbr (i1 |label )"
)


def _literal_text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):  # an f-string: its literal parts
        return "".join(v.value if isinstance(v, ast.Constant) else "0" for v in node.values)
    return None


def ir_literals(path: Path) -> list[int]:
    """Lines of string literals in ``path`` that read as LLVM IR."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sorted({node.lineno for node in ast.walk(tree)
                   if (text := _literal_text(node)) is not None and _IR.search(text)})


def test_the_scanner_sees_ir(tmp_path):
    sample = 'X = """\ndefine i32 @f(i32 %a) {\n  %b = add i32 %a, 1\n  ret i32 %b\n}\n"""\n'
    sample += 'Y = f"  %p{i} = getelementptr i64, ptr %args, i64 {i}"\nZ = "define a word"\n'
    path = tmp_path / "sample.py"
    path.write_text(sample, encoding="utf-8")
    assert ir_literals(path) == [1, 7]


def test_no_llvm_ir_in_python_strings():
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            lines = ir_literals(path)
            if lines and rel not in ALLOWED:
                found[rel] = lines
    assert found == {}, f"LLVM IR in Python string literals (file: lines): {found}"
