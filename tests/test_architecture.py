"""The house rules, checked independently of import-linter (which ``scripts/test.sh`` runs too).

* no import cycle among the modules of ``bayesgrpo`` and no module importing the top-level package
  (its lazy public API): an import graph built here from the source with :mod:`ast`, every import
  statement counted (function-local ones too);
* the layer order of ``ARCHITECTURE.md`` is the import-linter contract of ``pyproject.toml``, and every
  import between top-level modules runs down it (siblings separated by ``|`` never import each other);
* no file of ``bayesgrpo/`` over 600 lines, no function over 80 lines but the numeric kernels that
  ``ARCHITECTURE.md`` names.

Each checker is also run on a small package with a planted defect, so a checker that cannot fail fails.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from planted import planted_package

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "bayesgrpo"
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80


# ------------------------------------------------------------------------------------------ the graph
def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def import_graph(root: Path) -> dict[str, set[str]]:
    """``{module: modules it imports}`` for every module of the package at ``root`` (only its own)."""
    files = {module_name(p, root): p for p in root.rglob("*.py")}
    top = root.name
    graph: dict[str, set[str]] = {}
    for mod, path in files.items():
        is_pkg = path.name == "__init__.py"
        out = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    pkg = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    pkg = pkg[: len(pkg) - (node.level - 1)]
                    base = ".".join(pkg + ([base] if base else []))
                # ``from a import b``: the module a.b when it is one, else a
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            else:
                continue
            for n in names:
                while n and n not in files and "." in n:  # ``import a.b.c`` of a name inside a module
                    n = n.rsplit(".", 1)[0]
                if n in files and (n == top or n.startswith(top + ".")) and n != mod:
                    out.add(n)
        graph[mod] = out
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def root_importers(graph: dict[str, set[str]], top: str) -> list[str]:
    return sorted(m for m, deps in graph.items() if top in deps and m != top)


# ------------------------------------------------------------------------------------------ the layers
def architecture_layers() -> list[list[str]]:
    """The layer order written in ARCHITECTURE.md (the fenced block after the ``## Layers`` heading)."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    block = text.split("## Layers", 1)[1].split("```", 2)[1]
    return [re.split(r"\s*\|\s*", ln.strip()) for ln in block.strip().splitlines() if ln.strip()]


def contract_layers() -> list[list[str]]:
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in conf if c["type"] == "layers")["layers"]
    return [[f"bayesgrpo.{m.strip().strip('()')}" for m in ln.split("|")] for ln in layers]


def layer_violations(graph: dict[str, set[str]], layers: list[list[str]]) -> list[str]:
    """Imports between top-level modules of the package that do not run down ``layers``."""
    rank = {m: (i, m) for i, group in enumerate(layers) for m in group}

    def top(mod: str) -> str | None:
        parts = mod.split(".")
        return ".".join(parts[:2]) if len(parts) > 1 else None

    bad = []
    for mod, deps in graph.items():
        a = top(mod)
        for dep in deps:
            b = top(dep)
            if a is None or b is None or a == b:
                continue
            if a not in rank or b not in rank:
                bad.append(f"{mod} -> {dep}: {a if a not in rank else b} is in no layer")
            elif rank[a][0] >= rank[b][0]:
                bad.append(f"{mod} -> {dep} runs {'sideways' if rank[a][0] == rank[b][0] else 'up'}")
    return sorted(bad)


# ------------------------------------------------------------------------------------------ sizes
def kernels() -> set[str]:
    """``path::function`` of the numeric kernels allowed over the function limit (ARCHITECTURE.md)."""
    text = (
        (ROOT / "ARCHITECTURE.md")
        .read_text()
        .split("## Size limits and the numeric kernels", 1)[1]
        .split("\n## ", 1)[0]
    )
    return set(re.findall(r"`(bayesgrpo/[\w/]+\.py::\w+)`", text))


def function_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines of a function, its docstring not counted (the signature and decorators' line are)."""
    n = (node.end_lineno or node.lineno) - node.lineno + 1
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        n -= (first.end_lineno or first.lineno) - first.lineno + 1
    return n


def long_functions(root: Path, limit: int) -> dict[str, int]:
    """``{path::function: lines}`` of the functions of the package at ``root`` over ``limit`` lines."""
    out = {}
    for p in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = function_lines(node)
                if n > limit:
                    out[f"{p.relative_to(root.parent).as_posix()}::{node.name}"] = n
    return out


# ------------------------------------------------------------------------------------------ tests
def test_no_import_cycle_and_no_module_imports_the_public_api():
    graph = import_graph(PKG)
    assert len(graph) > 60  # every module was read
    assert cycles(graph) == []
    assert root_importers(graph, "bayesgrpo") == []


def test_the_layer_order_is_written_once_and_every_import_runs_down_it():
    written = [[f"bayesgrpo.{m.strip('()')}" for m in group] for group in architecture_layers()]
    assert written == contract_layers(), "ARCHITECTURE.md and [tool.importlinter] list different layers"
    tops = {module_name(p, PKG) for p in PKG.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    listed = {m for g in written for m in g}
    assert tops - {"bayesgrpo", "bayesgrpo.__main__"} <= listed, f"modules in no layer: {sorted(tops - listed)}"
    entry = "bayesgrpo.__main__"  # ``python -m bayesgrpo``: above every layer (import-linter's exhaustive_ignores)
    assert layer_violations({m: d for m, d in import_graph(PKG).items() if m != entry}, written) == []


def test_no_file_over_600_lines_and_no_function_over_80_but_the_named_kernels():
    big = {
        p.relative_to(ROOT).as_posix(): n
        for p in PKG.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES
    }
    assert big == {}, f"files over {MAX_FILE_LINES} lines: {big}"
    allowed = kernels()
    assert allowed, "ARCHITECTURE.md names no numeric kernel"
    long = long_functions(PKG, MAX_FUNCTION_LINES)
    assert {k: v for k, v in long.items() if k not in allowed} == {}, "functions over the limit"
    stale = sorted(k for k in allowed if k not in long)
    assert stale == [], f"ARCHITECTURE.md names kernels that are not over the limit: {stale}"


def test_the_checkers_find_planted_defects(tmp_path):
    root = planted_package(tmp_path, {
        "__init__.py": "",
        "low.py": "def f():\n    from pkg.high import g  # a function-local import counts\n",
        "high.py": "from . import low\nimport pkg\n",
        "sub/__init__.py": "",
        "sub/a.py": "from .b import x\n",
        "sub/b.py": "from pkg.sub import a\nx = 1\n",
        "long.py": 'def f():\n    """A docstring\n    of three lines, not counted.\n    """\n' + "    x = 1\n" * 85,
    })  # fmt: skip
    graph = import_graph(root)
    assert graph["pkg.low"] == {"pkg.high"} and graph["pkg.sub.a"] == {"pkg.sub.b"}
    assert sorted(cycles(graph)) == [["pkg.high", "pkg.low"], ["pkg.sub.a", "pkg.sub.b"]]
    assert root_importers(graph, "pkg") == ["pkg.high"]
    bad = layer_violations(graph, [["pkg.high"], ["pkg.low", "pkg.long"]])
    assert bad == ["pkg.low -> pkg.high runs up"]
    assert "pkg.sub" in layer_violations({"pkg.sub.a": {"pkg.low"}}, [["pkg.low"]])[0]
    assert long_functions(root, MAX_FUNCTION_LINES) == {"pkg/long.py::f": 86}
