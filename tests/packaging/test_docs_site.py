"""The documentation: README.md for users, the rest in docs/, built by MkDocs.

The site (``mkdocs.yml``) builds with ``--strict`` (a broken internal link or anchor, or
a page missing from the nav, fails it) when mkdocs is installed (``make install``: the
``dev`` extra). README.md stays short, and neither it nor any page carries development
history: no issue numbers, no commit hashes, no paths outside the repository.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 250

# Records that tools write as they run, kept as raw data: the fuzz campaign's summary
# names the commit it ran on (fuzz/campaign.py), the peer harness's summaries their runs.
GENERATED = ("docs/fuzz/results.md", "docs/perf/")

ISSUE = re.compile(r"\bissues? #?\d+", re.I)
OUTSIDE = re.compile(r"\.\./shared\b")
# seven to forty hex digits with at least one letter and one digit: an abbreviated or
# full commit hash (a plain number, or a word like "deadbeef", is not one)
COMMIT = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
MACHINE = re.compile(r"\b2-core\b|\bthis (?:machine|session)\b", re.I)


def _documents() -> list[Path]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [p for p in pages
            if not str(p.relative_to(ROOT)).startswith(GENERATED)]


def test_the_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail to docs/"


@pytest.mark.parametrize("pattern", [ISSUE, OUTSIDE, COMMIT, MACHINE],
                         ids=["issue-numbers", "outside-paths", "commit-hashes", "machines"])
def test_no_development_history_in_the_documentation(pattern: re.Pattern[str]) -> None:
    found = []
    for path in _documents():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if match := pattern.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {match.group(0)!r}")
    assert found == []


def test_every_page_is_in_the_site() -> None:
    """Every page of docs/ is named in mkdocs.yml's nav (or is a generated record)."""
    config = (ROOT / "mkdocs.yml").read_text()
    for path in _documents():
        if path.name == "README.md":
            continue
        rel = str(path.relative_to(ROOT / "docs"))
        assert f": {rel}" in config, f"{rel} is not in mkdocs.yml's nav"


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    pytest.importorskip("mkdocstrings_handlers.python")
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or "mkdocs"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    run = subprocess.run([mkdocs, "build", "--strict", "--quiet", "--site-dir",
                          str(tmp_path / "site")], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (tmp_path / "site" / "client" / "index.html").exists()
