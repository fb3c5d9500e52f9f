"""The pure core (model, forecast, sources, core loop, policies) must never import kopf, the
kubernetes client or asyncio, nor read the wall clock: ``now`` is always an argument."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PURE = [
    "advisor/model",
    "advisor/series.py",
    "advisor/judging.py",
    "advisor/forecast",
    "advisor/sources",
    "advisor/core",
    "policies",
]
FORBIDDEN_MODULES = {"kopf", "kubernetes", "asyncio"}
#: the wall clock, however it is reached: ``time.time()``, ``dt.datetime.now()``, ``date.today()``
CLOCK_ATTRS = {"time", "monotonic", "perf_counter", "now", "utcnow", "today"}
#: names that are the clock when imported bare (``from time import time``)
CLOCK_NAMES = {("time", "time"), ("time", "monotonic"), ("time", "perf_counter")}


def _pure_files() -> list[Path]:
    files: list[Path] = []
    for entry in PURE:
        path = ROOT / entry
        files.extend([path] if path.is_file() else sorted(path.rglob("*.py")))
    return files


def test_pure_packages_exist() -> None:
    assert len(_pure_files()) >= 5


def test_pure_core_imports_no_kopf_kubernetes_or_asyncio() -> None:
    offenders = []
    for path in _pure_files():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [
                f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in FORBIDDEN_MODULES
            ]
    assert offenders == []


def _clock_modules(tree: ast.AST) -> set[str]:
    """The names a file binds to ``time``, ``datetime`` or its classes (``import datetime as dt``,
    ``from datetime import datetime, date``)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.asname or a.name for a in node.names if a.name in ("time", "datetime")}
        elif isinstance(node, ast.ImportFrom) and node.module == "datetime":
            names |= {a.asname or a.name for a in node.names if a.name in ("datetime", "date")}
    return names


def _reads_clock(node: ast.Call, clocks: set[str], bare: set[str]) -> bool:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id in bare
    if not isinstance(func, ast.Attribute) or func.attr not in CLOCK_ATTRS:
        return False
    root = func.value
    while isinstance(root, ast.Attribute):  # dt.datetime.now: the chain's first name
        root = root.value
    return isinstance(root, ast.Name) and root.id in clocks


def test_pure_core_never_reads_the_wall_clock_or_the_environment() -> None:
    offenders = []
    for path in _pure_files():
        tree = ast.parse(path.read_text(), filename=str(path))
        clocks = _clock_modules(tree)
        bare = {
            a.asname or a.name
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and n.module
            for a in n.names
            if (n.module, a.name) in CLOCK_NAMES
        }
        for node in ast.walk(tree):
            clock = isinstance(node, ast.Call) and _reads_clock(node, clocks, bare)
            environment = isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv")
            if clock or environment:
                offenders.append(f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}")
    assert offenders == []


def test_the_clock_check_finds_every_spelling() -> None:
    """The check above, on the spellings it missed (only ``time.time()``-like calls were read)."""
    for source in (
        "import datetime as dt\nx = dt.datetime.now()",
        "from time import time\nx = time()",
        "from datetime import datetime\nx = datetime.utcnow()",
        "import time\nx = time.monotonic()",
    ):
        tree = ast.parse(source)
        call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call))
        bare = {
            a.asname or a.name
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom)
            for a in n.names
            if n.module == "time"
        }
        assert _reads_clock(call, _clock_modules(tree), bare), source
    tree = ast.parse("import datetime as dt\nx = dt.datetime.fromtimestamp(now)")
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call))
    assert not _reads_clock(call, _clock_modules(tree), set())  # a given time is no clock


def test_importing_the_pure_core_loads_no_forbidden_module() -> None:
    code = (
        "import sys, advisor.model, advisor.forecast, advisor.sources, advisor.core, policies\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'kopf', 'kubernetes', 'asyncio'})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == ""


def test_the_model_is_one_import_over_three_modules_that_read_each_other_one_way() -> None:
    """``advisor.model`` names every shared type; what is observed and forecast
    (``advisor.model.progress``) reads neither what policies see (``advisor.model.views``) nor what
    they return (``advisor.model.actions``), and ``actions`` reads no view."""
    import advisor.model as model
    from advisor.model import actions, progress, views

    parts = (progress, views, actions)
    names = [set(m.__all__) for m in parts]
    assert set(model.__all__) == set().union(*names)
    assert sum(len(n) for n in names) == len(model.__all__), "a name is exported by two modules"
    for name in model.__all__:
        home = next(m for m in parts if name in m.__all__)
        assert getattr(model, name) is getattr(home, name), name

    def advisor_imports(module: str) -> set[str]:
        tree = ast.parse((ROOT / "advisor" / "model" / f"{module}.py").read_text())
        found = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        return {m for m in found if m.startswith("advisor")}

    assert not advisor_imports("progress")
    assert advisor_imports("actions") == set()
    assert advisor_imports("views") == {"advisor.model.actions", "advisor.model.progress"}
