"""amcast.analytics depends on the log schema only: no import of amcast outside itself.

The CLI (``amcast/commands/analyze.py``) imports the analytics package, never the other
way round; ``amcast.report`` and ``amcast.plots`` use only its Spark-free text module.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_analytics_imports_nothing_of_amcast_outside_itself() -> None:
    modules = sorted((ROOT / "analytics").glob("*.py"))
    assert len(modules) > 10
    def outside(name: str) -> bool:
        top = name.split(".")[0]
        if top in ("analytics", "daemon", "protocols"):  # one import name: amcast.*
            return True
        return top == "amcast" and name.split(".")[:2] != ["amcast", "analytics"]

    bad = {f"{m.name}: {name}" for m in modules for name in _imports(m) if outside(name)}
    assert bad == set()


def test_report_and_plots_use_only_the_spark_free_text_module_of_analytics() -> None:
    """One number format for every report: ``amcast.report`` borrows
    ``amcast.analytics.text.format_value``; nothing else of analytics (no Spark)."""
    for path in (ROOT / "amcast" / "report.py", ROOT / "amcast" / "plots.py"):
        used = {name for name in _imports(path) if "analytics" in name}
        assert used <= {"amcast.analytics.text"}, path
    text_imports = _imports(ROOT / "analytics" / "text.py")
    assert not any(name.split(".")[0] in ("pyspark", "amcast") for name in text_imports)


def test_importing_the_report_module_does_not_load_spark() -> None:
    import subprocess
    import sys

    code = ("import sys, amcast.report, amcast.commands.status; "
            "print(any(m.startswith('pyspark') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "False"
