"""The pure core (model, forecast, sources, core loop, policies) must never import kopf, the
kubernetes client or asyncio, nor read the wall clock: ``now`` is always an argument."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PURE = ["advisor/model", "advisor/forecast", "advisor/sources", "advisor/core", "policies"]
FORBIDDEN_MODULES = {"kopf", "kubernetes", "asyncio"}
FORBIDDEN_CALLS = {("time", "time"), ("time", "monotonic"), ("datetime", "now"), ("datetime", "utcnow")}


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


def test_pure_core_never_reads_the_wall_clock() -> None:
    offenders = []
    for path in _pure_files():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                if isinstance(owner, ast.Name) and (owner.id, node.func.attr) in FORBIDDEN_CALLS:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_importing_the_pure_core_loads_no_forbidden_module() -> None:
    code = (
        "import sys, advisor.model, advisor.forecast, advisor.sources, advisor.core, policies\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'kopf', 'kubernetes', 'asyncio'})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == ""


def test_the_model_is_one_import_over_two_modules_and_progress_never_reads_a_decision() -> None:
    """``advisor.model`` names every shared type; what is observed and forecast
    (``advisor.model.progress``) stands apart from what policies see and return
    (``advisor.model.decisions``), which reads a forecast but is never read by it."""
    import advisor.model as model
    from advisor.model import decisions, progress

    halves = set(progress.__all__) | set(decisions.__all__)
    assert set(model.__all__) == halves and not set(progress.__all__) & set(decisions.__all__)
    for name in model.__all__:
        home = progress if name in progress.__all__ else decisions
        assert getattr(model, name) is getattr(home, name), name
    tree = ast.parse((ROOT / "advisor" / "model" / "progress.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not {m for m in imported if m.startswith("advisor")}
