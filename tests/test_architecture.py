"""Issue 17's structural rules, kept true by a test: no function over 100 lines in the packages
and no import cycle among their modules at module level (a cycle makes the import order decide
which names exist; imports inside functions, the lazy ones, do not count)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# repository folder -> the package it installs as (setup.cfg's package_dir)
PACKAGES = {"tensorlang": "tensorlang", "runtime": "tensorlang.runtime",
            "autotune": "tensorlang.autotune", "graph": "tensorlang.graph"}
MAX_FUNCTION_LINES = 100


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once for all the checks (seconds for all the packages)."""
    return ast.parse(path.read_text())


def _modules() -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, is a package's __init__)."""
    found = {}
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = [package, *path.relative_to(ROOT / folder).with_suffix("").parts]
            is_init = parts[-1] == "__init__"
            found[".".join(parts[:-1] if is_init else parts)] = (path, is_init)
    return found


def _absolute(node: ast.ImportFrom, module: str, is_init: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")[: len(module.split(".")) - (0 if is_init else 1)]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _module_level_nodes(tree: ast.Module):
    """Statements run at import: top level and inside top-level if/try/with, not in functions,
    classes or `if TYPE_CHECKING:` blocks."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _imports(modules) -> dict[str, set[str]]:
    edges = {name: set() for name in modules}
    for name, (path, is_init) in modules.items():
        for node in _module_level_nodes(_tree(path)):
            if isinstance(node, ast.Import):
                edges[name] |= {a.name for a in node.names if a.name in modules}
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, name, is_init)
                for alias in node.names:
                    target = f"{base}.{alias.name}"
                    if target in modules or base in modules:
                        edges[name].add(target if target in modules else base)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for start, targets in edges.items():
        if start in index:
            continue
        work = [(start, iter(sorted(targets)))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while not component or component[-1] != node:
                        component.append(stack.pop())
                        on_stack.discard(component[-1])
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_function_over_100_lines():
    long = [f"{path.relative_to(ROOT)}:{node.lineno} {node.name} "
            f"({node.end_lineno - node.lineno + 1} lines)"
            for path, _ in _modules().values()
            for node in ast.walk(_tree(path))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_no_module_level_import_cycles():
    assert _cycles(_imports(_modules())) == []


def test_the_cycle_finder_finds_a_cycle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(edges) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


# multiprocessing's module-level spellings that start or share processes with the default start
# method: fork on Linux up to Python 3.13, forkserver from 3.14 (a worker would then run without
# the parent's state, or fork a multi-threaded parent); ours pass workers.CONTEXT (spawn)
_DEFAULT_CONTEXT_NAMES = {"Process", "Pool", "Queue", "SimpleQueue", "JoinableQueue", "Pipe",
                          "Manager", "Value", "Array", "set_start_method"}
_CHECKED_CALLS = _DEFAULT_CONTEXT_NAMES | {"get_context", "ProcessPoolExecutor"}


def _default_start_method_uses(path: Path) -> list[str]:
    found = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom) and node.module == "multiprocessing":
            found += [f"from multiprocessing import {a.name}" for a in node.names
                      if a.name in _DEFAULT_CONTEXT_NAMES]
        last = getattr(node, "func", None)
        last = getattr(last, "attr", None) or getattr(last, "id", None)
        if not isinstance(node, ast.Call) or last not in _CHECKED_CALLS:
            continue  # (ast.unparse of every call took seconds)
        name = ast.unparse(node.func)
        keywords = {k.arg for k in node.keywords}
        if name.endswith("ProcessPoolExecutor") and "mp_context" not in keywords:
            found.append(f"{name}() without mp_context")
        elif name.startswith("multiprocessing.") and \
                name.split(".", 1)[1] in _DEFAULT_CONTEXT_NAMES | {"get_context"} and \
                not (name.endswith("get_context") and node.args):
            found.append(f"{name}()")
    return found


def test_every_process_is_started_with_an_explicit_start_method():
    uses = [f"{path.relative_to(ROOT)}: {u}" for path, _ in _modules().values()
            for u in _default_start_method_uses(path)]
    assert not uses, f"processes started with the default start method: {uses}"


def test_the_start_method_check_finds_a_default_pool(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import concurrent.futures as cf, multiprocessing\n"
                   "cf.ProcessPoolExecutor(2)\nmultiprocessing.get_context()\n"
                   "cf.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context('spawn'))\n")
    assert _default_start_method_uses(bad) == ["cf.ProcessPoolExecutor() without mp_context",
                     "multiprocessing.get_context()"]
