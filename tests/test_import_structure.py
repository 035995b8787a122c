"""The import structure: no cycles among the project's modules, and the statistics package
``fairengine`` free of the orchestration and reporting stack.

The graph is read from the source (``ast``), counting every import: at module level, inside
functions (run-time imports), under ``TYPE_CHECKING``, and the names a package exports lazily
(:func:`fairengine.lazy_exports.lazy_exports`, resolved to the submodule that defines them). A
cycle is any strongly connected component of two or more modules.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("fairengine", "tasks", "flows", "deployments", "templates")
ORCHESTRATION = ("prefect", "mlflow", "jinja2", "great_expectations")


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


def _lazy_exports(tree: ast.Module) -> dict[str, str]:
    """``{public name: submodule}`` of a package's ``lazy_exports(__name__, {...})`` call."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "lazy_exports"
            and len(node.args) == 2
            and isinstance(node.args[1], ast.Dict)
        ):
            return {
                k.value: v.value
                for k, v in zip(node.args[1].keys, node.args[1].values, strict=True)
                if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)
            }
    return {}


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (see the module docstring)."""
    modules = _modules()
    trees = {m: ast.parse(p.read_text(), str(p)) for m, p in modules.items()}
    lazy = {m: _lazy_exports(t) for m, t in trees.items() if modules[m].name == "__init__.py"}

    def resolve(name: str) -> str | None:
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            candidate = ".".join(parts[:i])
            if candidate in modules:
                if i == len(parts) - 1 and parts[-1] in lazy.get(candidate, {}):
                    return f"{candidate}.{lazy[candidate][parts[-1]]}"
                return candidate
        return None

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for m, tree in trees.items():
        package = m if modules[m].name == "__init__.py" else m.rpartition(".")[0]
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*up, base] if base else up)
                targets = [f"{base}.{a.name}" for a in node.names]
            for t in targets:
                hit = resolve(t)
                if hit is not None and hit != m:
                    graph[m].add(hit)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of two or more modules (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[v] = min(low[v], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_among_the_project_modules() -> None:
    graph = import_graph()
    assert len(graph) > 100, "the project's modules were not found"
    assert "fairengine.fliptest.method" in graph["fairengine.fliptest.resampler"]
    found = cycles(graph)
    assert found == [], f"import cycles: {found}"


def test_fairengine_imports_no_orchestration_or_reporting_package() -> None:
    """In the source: no import of prefect, mlflow, jinja2 or great_expectations anywhere in
    ``fairengine``; at run time: importing every ``fairengine`` module loads none of them."""
    offenders = []
    for name, path in _modules().items():
        if not name.startswith("fairengine"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            offenders += [f"{name}: {n}" for n in names if n.split(".")[0] in ORCHESTRATION]
    assert offenders == []
    modules = sorted(m for m in _modules() if m.startswith("fairengine"))
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}:\n"
        "    importlib.import_module(m)\n"
        f"print(sorted(p for p in {ORCHESTRATION!r} if p in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", out.stdout


def test_only_the_front_door_refers_upward() -> None:
    """``fairengine.audit`` (the one-call API) lives in ``flows.python_api``; the package's
    ``__init__`` is the one ``fairengine`` module that refers to the orchestration layer, and
    only to that module, imported on first use (``import fairengine`` loads no Prefect)."""
    graph = import_graph()
    upward = {
        m: sorted(t for t in targets if not t.startswith("fairengine"))
        for m, targets in graph.items()
        if m.startswith("fairengine")
    }
    assert {m: t for m, t in upward.items() if t} == {"fairengine": ["flows.python_api"]}
    code = (
        "import sys, fairengine\n"
        "assert callable(fairengine.audit) and fairengine.AuditResult.to_frame\n"
    )
    bare = (
        "import sys, fairengine\n"
        "print(sorted(m for m in sys.modules if m.startswith(('prefect', 'flows'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", bare], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr[-2000:]
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]


def test_the_audit_flow_imports_torch_and_pot_only_with_a_transport_map() -> None:
    """Importing the audit flow (every step and resampler) loads neither torch nor POT: they
    come with the first transport map (``fairengine.transport`` exports lazily; FlipTest
    imports the maps where it fits them), so an audit without FlipTest or individual fairness,
    or one that reads their results from the cache, does not pay their import (1.5 s). What a
    pair of groups imports (``pair_modules``, imported ahead by the worker processes: left to
    the first pair, it made FlipTest 5 s slower) includes them; the maps still load through the
    package's names."""
    code = (
        "import sys\n"
        "import flows.audit, fairengine.fliptest.resampler, fairengine.fliptest.statistics\n"
        "before = sorted(m for m in ('torch', 'ot') if m in sys.modules)\n"
        "import importlib\n"
        "from fairengine.fliptest.config import FlipTestConfig\n"
        "from fairengine.fliptest.method import pair_modules\n"
        "for m in pair_modules(FlipTestConfig()):  # what the worker processes import ahead\n"
        "    importlib.import_module(m)\n"
        "assert 'torch' in sys.modules and 'ot' in sys.modules, 'a pair would import them'\n"
        "from fairengine.transport import ESTIMATORS, EntropicMap\n"
        "assert ESTIMATORS['entropic'] is EntropicMap\n"
        "print(before, sorted(m for m in ('torch', 'ot') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[] ['ot', 'torch']", out.stdout
