"""Man pages and shell completion generated from the parsers (``deploy/manpages.py``,
``make man``): they build without groff warnings, name every subcommand and option, and
the systemd units' ``Documentation=`` names the page that is installed."""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from amcast.daemon.main import build_parser as amcastd_parser

from amcast.cli import build_parser as amcast_parser

ROOT = Path(__file__).resolve().parents[2]


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("manpages", ROOT / "deploy" / "manpages.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("man")
    _module().generate(out)
    return out


def _commands(parser: argparse.ArgumentParser, words: list[str]) -> list[list[str]]:
    found = [words]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _commands(sub, [*words, name])
    return found


def _option_strings(parser: argparse.ArgumentParser) -> set[str]:
    strings = {s for a in parser._actions for s in a.option_strings}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                strings |= _option_strings(sub)
    return strings


def _render(page: Path) -> str:
    groff = shutil.which("groff")
    if groff is None:
        pytest.skip("groff is not installed (Debian: groff-base)")
    done = subprocess.run([groff, "-man", "-Tutf8", "-ww", "-rLL=200n", str(page)],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr  # -ww: every warning, none expected
    # the rendered text, without overstrike and hyphenation characters
    text = done.stdout
    while "\b" in text:
        i = text.index("\b")
        text = text[: i - 1] + text[i + 1:]
    return text.replace("‐", "-").replace("−", "-")


@pytest.mark.parametrize(("name", "page", "build"), [
    ("amcast", "man1/amcast.1", amcast_parser), ("amcastd", "man8/amcastd.8", amcastd_parser),
])
def test_pages_build_and_name_every_command_and_option(
    generated: Path, name: str, page: str, build: object,
) -> None:
    parser = build()  # type: ignore[operator]
    text = _render(generated / page)
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS", "SEE ALSO"):
        assert f"\n{section}\n" in text, section
    commands = _commands(parser, [name])
    if name == "amcast":
        assert len(commands) > 12  # the subcommands, cluster's included
        assert ["amcast", "cluster", "start"] in commands
        # the benchmarks are not installed: one `bench` entry, the same from a checkout
        assert [w for w in commands if w[1:2] == ["bench"]] == [["amcast", "bench"]]
        assert "source checkout" in " ".join(text.split())
    for words in commands[1:]:
        assert " ".join(words) in text, words
    missing = {s for s in _option_strings(parser) if s not in text}
    assert not missing
    assert "``" not in text  # docstring markup is rendered, not shown


def test_bash_completion_offers_subcommands_and_options(generated: Path) -> None:
    bash = shutil.which("bash")
    assert bash is not None
    script = generated / "bash-completion" / "amcast"

    def complete(*words: str) -> set[str]:
        line = " ".join(f"'{w}'" for w in words)
        probe = (f"source {script}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; "
                 "_amcast; printf '%s\\n' \"${COMPREPLY[@]}\"")
        done = subprocess.run([bash, "--norc", "-c", probe], capture_output=True, text=True,
                              timeout=30)
        assert done.returncode == 0, done.stderr
        return set(done.stdout.split())

    assert {"send", "listen", "status", "cluster", "bench"} <= complete("amcast", "")
    assert complete("amcast", "cluster", "") >= {"start", "run", "stop"}
    assert "--nodes" in complete("amcast", "cluster", "start", "--no")
    assert complete("amcast", "send", "--service", "") == {"causal", "agreed", "safe"}
    assert "--group" in complete("amcast", "listen", "--gr")
    daemon = generated / "bash-completion" / "amcastd"
    done = subprocess.run([bash, "--norc", "-c", f"source {daemon}; COMP_WORDS=(amcastd --c); "
                           "COMP_CWORD=1; _amcastd; echo ${COMPREPLY[@]}"],
                          capture_output=True, text=True, timeout=30)
    assert set(done.stdout.split()) == {"--config", "--check"}


def test_units_document_an_installed_page(generated: Path) -> None:
    for unit in ("amcastd.service", "amcastd@.service"):
        settings = [line.split("=", 1)[1].split()
                    for line in (ROOT / "deploy" / "systemd" / unit).read_text().splitlines()
                    if line.startswith("Documentation=")]
        assert settings, unit
        docs = [d for words in settings for d in words]
        assert "man:amcastd(8)" in docs
        for doc in docs:
            if doc.startswith("man:"):
                page, section = doc.removeprefix("man:").rstrip(")").split("(")
                assert (generated / f"man{section}" / f"{page}.{section}").is_file(), doc


ZSH_PROBE = """
fpath=({functions} $fpath)
autoload -U compinit && compinit -u -D
print -r -- "registered ${{_comps[amcast]}} ${{_comps[amcastd]}}"
# outside a completion widget compadd cannot run: offer what it would be given, filtered
# by the word being completed as compadd filters it
compadd() {{ while (( $# )) && [[ $1 != - ]]; do shift; done; (( $# )) && shift
            (( $# )) || return 1; print -rl -- ${{(M)@:#${{words[CURRENT]}}*}} }}
compset() {{ return 1 }}
_default() {{ return 1 }}
complete_line() {{ words=("$@") CURRENT=$#; print -r -- "-- $*"; eval "$_comps[$1]" }}
complete_line amcast ''
complete_line amcast cluster ''
complete_line amcast cluster start --no
complete_line amcast send --service ''
complete_line amcastd --c
"""


def _zsh_offers(output: str) -> dict[str, set[str]]:
    """The probe's output as ``{line completed: words offered}``."""
    offers: dict[str, set[str]] = {}
    current = None
    for line in output.splitlines():
        if line.startswith("-- "):
            current = line[3:].strip()
            offers[current] = set()
        elif current is not None:
            offers[current].add(line)
    return offers


def test_zsh_completion_loads_and_completes(generated: Path, tmp_path: Path) -> None:
    """The installed ``_amcast`` (``/usr/share/zsh/vendor-completions``) found on zsh's
    ``fpath`` by ``compinit``, registered for both programs, loading the bash completion
    through ``bashcompinit`` without an error, first and again (the bash scripts'
    ``complete`` lines take over the entry), offering what the bash completion offers."""
    zsh = shutil.which("zsh")
    if zsh is None:
        pytest.skip("zsh is not installed")
    installed = "/usr/share/bash-completion/completions"
    text = (generated / "zsh" / "_amcast").read_text()
    assert text.startswith("#compdef amcast amcastd\n") and installed in text
    functions = tmp_path / "functions"
    functions.mkdir()
    (functions / "_amcast").write_text(text.replace(installed, str(generated / "bash-completion")))
    probe = tmp_path / "probe.zsh"
    probe.write_text(ZSH_PROBE.format(functions=functions)
                     + "complete_line amcast cluster ''\n")  # a second time: still works
    done = subprocess.run([zsh, "-f", str(probe)], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.splitlines()[0] == "registered _amcast _amcast"
    offers = _zsh_offers(done.stdout)
    assert {"send", "listen", "status", "cluster", "bench"} <= offers["amcast"]
    assert offers["amcast cluster"] >= {"start", "run", "stop"}
    assert "--nodes" in offers["amcast cluster start --no"]
    assert offers["amcast send --service"] == {"causal", "agreed", "safe"}
    assert offers["amcastd --c"] == {"--config", "--check"}
