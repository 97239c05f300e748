"""No public name of ``bayesgrpo/`` that only the research or the tests use (issue 30: research out of the package).

A public top-level function or class of the package must be reached from what the package runs or shows its
users, else it belongs in ``bench/`` (or, when only a test uses it, in that test). Reached, here, is read from
the source with :mod:`ast`, its imports resolved (aliases, re-exports of ``__init__``, ``from m import *``,
``"module:function"`` registry strings, the lazy public API of ``bayesgrpo/__init__.py``):

* the roots: every definition of the front ends (``bayesgrpo.cli``, ``python -m bayesgrpo``, the public modules
  of ``bayesgrpo.integrations`` -- the callback, the verl backend, ``watch``), the lazy public API, the
  module-level code of every module (registries, defaults), and the names the user docs show in code (README,
  ``docs/``: code blocks and inline code; notebooks: their code cells);
* then every definition a reached one refers to, to a fixed point. An ``__init__``'s re-export and an
  ``__all__`` entry are not uses.

What ``bench/`` or ``tests/`` import does not count: a name reached from nowhere else is reported with where it
is still referenced. The checker also runs on a small package with planted defects.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from planted import planted_package

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "bayesgrpo"
FRONT_ENDS = ("bayesgrpo.cli", "bayesgrpo.__main__")
PUBLIC_FRONT_PACKAGES = ("bayesgrpo.integrations",)  # its public (not ``_``-prefixed) modules are user API

#: known bench- or test-only names left in the package, each with why (keep this list short)
ALLOWED = {
    # models/ and forecast/ are being redesigned in the same issue (issue 30, item 1); they leave with it
    "bayesgrpo.models.prior.fit_population": "bench/fit_population_prior.py fits the shipped prior with it",
    "bayesgrpo.models.prior.with_spread_population": "bench/fit_population_prior.py, with fit_population",
    "bayesgrpo.models.spread.spread_expectations": "bench/spread_validation.py, bench/spread_checks.py",
    "bayesgrpo.models.kinds.build_model": "the graph of a kind outside a Forecaster; tests only",
    "bayesgrpo.models.arrays.lag_sequence": "tests only",
    "bayesgrpo.models.kalman_op.kalman_ar2_loglik": "tests only (the Op's reference)",
    "bayesgrpo.models.kalman_op.refresh3_loglik_grad": "bench/lag_op_benchmark.py, tests",
    # the executor seam's protocol: what a user's own executor implements (named in the forecast_batch docs)
    "bayesgrpo.inference.executor.Executor": "a typing.Protocol, named only in docstrings",
}


# ------------------------------------------------------------------------------------------ the source
def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


class Package:
    """The modules of the package at ``root``: their trees, top-level definitions and import bindings."""

    def __init__(self, root: Path):
        self.top = root.name
        self.files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
        self.trees = {m: ast.parse(p.read_text(), str(p)) for m, p in self.files.items()}
        self.defs = {
            m: {n.name: n for n in t.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
            for m, t in self.trees.items()
        }
        self.lazy = self._lazy_api()
        self._bindings = {m: self.bindings(m, t) for m, t in self.trees.items()}

    def is_pkg(self, mod: str | None) -> bool:
        return mod is not None and self.files[mod].name == "__init__.py"

    def _lazy_api(self) -> dict[str, tuple[str, str]]:
        """``_LAZY = {name: (module, attribute)}`` of the top-level ``__init__`` (the lazy public API)."""
        for node in self.trees.get(self.top, ast.Module(body=[], type_ignores=[])).body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_LAZY" for t in node.targets):
                return ast.literal_eval(node.value)
        return {}

    def star_names(self, mod: str) -> list[str]:
        for n in self.trees[mod].body:
            if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets):
                try:
                    return [str(x) for x in ast.literal_eval(n.value)]
                except ValueError:
                    break
        return [k for k in self.defs[mod] if not k.startswith("_")]

    def base(self, mod: str | None, node: ast.ImportFrom) -> str:
        name = node.module or ""
        if node.level and mod is not None:
            pkg = mod.split(".") if self.is_pkg(mod) else mod.split(".")[:-1]
            pkg = pkg[: len(pkg) - (node.level - 1)]
            name = ".".join(pkg + ([name] if name else []))
        return name

    def bindings(self, mod: str | None, tree: ast.AST) -> dict[str, tuple[str, ...]]:
        """Local name -> ``("mod", module)`` or ``("obj", module, name)`` for every import of the package."""
        out: dict[str, tuple[str, ...]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = self.base(mod, node)
                if base != self.top and not base.startswith(self.top + "."):
                    continue
                for a in node.names:
                    if a.name == "*":
                        out.update({n: ("obj", base, n) for n in self.star_names(base)} if base in self.files else {})
                    elif f"{base}.{a.name}" in self.files:
                        out[a.asname or a.name] = ("mod", f"{base}.{a.name}")
                    else:
                        out[a.asname or a.name] = ("obj", base, a.name)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name == self.top or a.name.startswith(self.top + "."):
                        out[a.asname or self.top] = ("mod", a.name if a.asname else self.top)
        return out

    def resolve(self, mod: str, name: str, seen: frozenset = frozenset()) -> tuple[str, str]:
        """The definition ``(module, name)`` that ``mod.name`` is (through re-exports and the lazy API);
        ``("module", m)`` for a module."""
        if (mod, name) in seen:
            return (mod, name)
        seen = seen | {(mod, name)}
        if name in self.defs.get(mod, {}):
            return (mod, name)
        if mod == self.top and name in self.lazy:
            return self.resolve(*self.lazy[name], seen)
        if f"{mod}.{name}" in self.files:
            return ("module", f"{mod}.{name}")
        v = self._bindings.get(mod, {}).get(name)
        if v is not None:
            return ("module", v[1]) if v[0] == "mod" else self.resolve(v[1], v[2], seen)
        return (mod, name)

    def refs(self, mod: str | None, nodes: list[ast.AST], binds: dict) -> set[tuple[str, str]]:
        """The package definitions the code ``nodes`` (of module ``mod``, None outside the package) refers to."""
        out: set[tuple[str, str]] = set()
        own = self.defs.get(mod, {}) if mod else {}
        for root in nodes:
            for node in ast.walk(root):
                if isinstance(node, ast.Name):
                    if node.id in own:
                        out.add((mod, node.id))
                    v = binds.get(node.id)
                    if v is not None and v[0] == "obj":
                        out.add(self.resolve(v[1], v[2]))
                elif isinstance(node, ast.Attribute):
                    out |= self._attribute(node, binds)
                elif isinstance(node, ast.ImportFrom):
                    base = self.base(mod, node)
                    out |= {self.resolve(base, a.name) for a in node.names if base in self.files and a.name != "*"}
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    out |= self._string(mod, node.value, own, binds)
        return {r for r in out if r[0] != "module"}

    def _attribute(self, node: ast.Attribute, binds: dict) -> set[tuple[str, str]]:
        chain = []
        x: ast.AST = node
        while isinstance(x, ast.Attribute):
            chain.append(x.attr)
            x = x.value
        if not isinstance(x, ast.Name) or x.id not in binds:
            return set()
        v = binds[x.id]
        target = ("module", v[1]) if v[0] == "mod" else self.resolve(v[1], v[2])
        if target[0] != "module":
            return set()
        mod = target[1]
        for part in reversed(chain):
            if f"{mod}.{part}" in self.files:
                mod = f"{mod}.{part}"
                continue
            return {self.resolve(mod, part)}
        return set()

    def _string(self, mod: str | None, text: str, own: dict, binds: dict) -> set[tuple[str, str]]:
        """A name given as a string: ``"module:function"`` (a registry, relative to the module's package, or
        absolute), or the name of a definition of the module or an import (getattr, string annotations)."""
        out = set()
        m = re.fullmatch(r"([\w.]+)[:.](\w+)", text)
        if m:
            pkg = (mod if self.is_pkg(mod) else mod.rsplit(".", 1)[0]) if mod else self.top
            for cand in (m.group(1), f"{pkg}.{m.group(1)}"):
                if cand in self.files:
                    out.add(self.resolve(cand, m.group(2)))
        elif re.fullmatch(r"[A-Za-z_]\w*", text):
            if text in own:
                out.add((mod, text))
            v = binds.get(text)
            if v is not None and v[0] == "obj":
                out.add(self.resolve(v[1], v[2]))
        return out


# ------------------------------------------------------------------------------------------ reached
def is_all(node: ast.stmt) -> bool:
    return isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)


def doc_code(texts: list[str]) -> str:
    """The code the user docs show: fenced blocks and inline code spans of Markdown."""
    out = []
    for text in texts:
        out += re.findall(r"```[^\n]*\n(.*?)```", text, flags=re.S)
        out += re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    return "\n".join(out)


def notebook_code(path: Path) -> str:
    cells = json.loads(path.read_text()).get("cells", [])
    return "\n".join("".join(c.get("source", "")) for c in cells if c.get("cell_type") == "code")


def unreached(
    pkg: Package,
    *,
    front_ends: tuple[str, ...],
    public_packages: tuple[str, ...],
    docs: str = "",
    notebooks: tuple[str, ...] = (),
) -> set[str]:
    """``module.name`` of the public top-level definitions of ``pkg`` that nothing the package runs or shows
    its users reaches (see the module docstring)."""
    graph: dict[tuple[str, str], set[tuple[str, str]]] = {}
    roots: set[tuple[str, str]] = {pkg.resolve(pkg.top, n) for n in pkg.lazy}
    for mod, tree in pkg.trees.items():
        binds = pkg._bindings[mod]
        front = mod.startswith(front_ends) or any(
            mod.startswith(p + ".") and not mod.rsplit(".", 1)[1].startswith("_") for p in public_packages
        )
        level: list[ast.AST] = []
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                graph[(mod, node.name)] = pkg.refs(mod, [node], binds)
                if mod.startswith(front_ends) or (front and not node.name.startswith("_")):
                    roots.add((mod, node.name))
            elif not (is_all(node) or (pkg.is_pkg(mod) and isinstance(node, (ast.Import, ast.ImportFrom)))):
                level.append(node)  # module-level code runs on import (an ``__init__``'s re-export is no use)
        roots |= pkg.refs(mod, level, binds)
    words = set(re.findall(r"[A-Za-z_]\w*", docs))
    roots |= {d for d in graph if d[1] in words}
    for code in notebooks:
        tree = ast.parse(code)
        roots |= pkg.refs(None, [tree], pkg.bindings(None, tree))
    seen: set[tuple[str, str]] = set()
    stack = list(roots)
    while stack:
        d = stack.pop()
        if d not in seen:
            seen.add(d)
            stack.extend(graph.get(d, ()))
    return {f"{m}.{n}" for (m, n) in graph if not n.startswith("_") and (m, n) not in seen}


def references_outside(pkg: Package, names: set[str], dirs: list[Path]) -> dict[str, list[str]]:
    """Where (files under ``dirs``) each of ``names`` is referenced."""
    out: dict[str, list[str]] = {n: [] for n in names}
    for d in dirs:
        for p in sorted(d.rglob("*.py")):
            tree = ast.parse(p.read_text(), str(p))
            for m, n in pkg.refs(None, [tree], pkg.bindings(None, tree)):
                if f"{m}.{n}" in out:
                    out[f"{m}.{n}"].append(p.relative_to(d.parent).as_posix())
    return out


# ------------------------------------------------------------------------------------------ tests
def test_every_public_name_of_the_package_is_reached_from_a_front_end_or_the_user_docs():
    pkg = Package(PKG)
    assert len(pkg.files) > 60  # every module was read
    docs = doc_code([(ROOT / "README.md").read_text(), *(p.read_text() for p in sorted((ROOT / "docs").rglob("*.md")))])
    nbs = tuple(notebook_code(p) for p in sorted((ROOT / "notebooks").glob("*.ipynb")))
    bad = unreached(pkg, front_ends=FRONT_ENDS, public_packages=PUBLIC_FRONT_PACKAGES, docs=docs, notebooks=nbs)
    where = references_outside(pkg, bad - set(ALLOWED), [ROOT / "bench", ROOT / "tests"])
    assert sorted(bad - set(ALLOWED)) == [], (
        "public names no front end, module-level code or user doc reaches (move them to bench/, or into the "
        f"test that uses them): { {n: sorted(set(w)) for n, w in where.items()} }"
    )
    stale = sorted(set(ALLOWED) - bad)
    assert stale == [], f"ALLOWED names that are reached now or gone (drop them from the list): {stale}"


def test_the_checker_finds_planted_bench_only_names(tmp_path):
    root = planted_package(tmp_path, {
        "__init__.py": '_LAZY = {"Api": ("pkg.core", "Api")}\n',
        "cli/__init__.py": "",
        "cli/app.py": "from pkg.core import run\n\ndef main():\n    return run()\n",
        "core/__init__.py": "from .impl import *  # noqa\nfrom .impl import unused_reexport\n",
        "core/impl.py": (
            '__all__ = ["run", "Api", "only_bench", "helper", "unused_reexport", "in_docs", "by_string", "in_nb"]\n'
            "REGISTRY = {'x': 'impl:by_string'}\n"
            "def run():\n    return _private()\n"
            "def _private():\n    return 1\n"
            "class Api:\n    pass\n"
            "def only_bench():\n    return helper()\n"  # planted: reached only by bench
            "def helper():\n    return 2\n"  # planted: used only by a bench-only function
            "def unused_reexport():\n    pass\n"  # planted: re-exported by __init__, used by nothing
            "def in_docs():\n    pass\n"
            "def by_string():\n    pass\n"
            "def in_nb():\n    pass\n"
        ),
        "integrations/__init__.py": "",
        "integrations/_worker.py": "def internal():\n    pass\n",  # planted: a private front-end module
        "integrations/callback.py": "import pkg.core as C\n\nclass Callback:\n    def f(self):\n        return C.Api\n",
    })  # fmt: skip
    pkg = Package(root)
    assert pkg.resolve("pkg", "Api") == ("pkg.core.impl", "Api")
    assert pkg.resolve("pkg.core", "only_bench") == ("pkg.core.impl", "only_bench")
    docs = doc_code(["Use `in_docs()` like this.\n```python\nfrom pkg import Api\n```\n"])
    got = unreached(
        pkg,
        front_ends=("pkg.cli",),
        public_packages=("pkg.integrations",),
        docs=docs,
        notebooks=("from pkg.core.impl import in_nb\nin_nb()\n",),
    )
    assert got == {
        "pkg.core.impl.only_bench",
        "pkg.core.impl.helper",
        "pkg.core.impl.unused_reexport",
        "pkg.integrations._worker.internal",
    }
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "study.py").write_text("from pkg.core import only_bench\n")
    assert references_outside(pkg, got, [bench])["pkg.core.impl.only_bench"] == ["bench/study.py"]
