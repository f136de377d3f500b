"""Man pages and shell completion for ``amcast`` and ``amcastd``, generated from their
argparse parsers (``make man``; ``make deb`` packs the result).

    python deploy/manpages.py OUTDIR

writes ``OUTDIR/man1/amcast.1``, ``OUTDIR/man8/amcastd.8``,
``OUTDIR/bash-completion/amcast``, ``OUTDIR/bash-completion/amcastd`` and
``OUTDIR/zsh/_amcast`` (zsh loads the installed bash completion through
``bashcompinit``).

Theory of operation: every parser is walked, subparsers included (``amcast cluster
start``), so a new subcommand or option appears in the pages and in completion without
editing anything here (``amcast bench`` is one entry: the benchmarks are not installed).
The text is argparse's own (descriptions, help strings with their defaults expanded, the
epilog); double backticks become bold.
Only the standard library is used, so the build host needs nothing beyond the project.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Command:
    """One parser in the tree: its words (``["amcast", "cluster", "start"]``) and text."""

    words: list[str]
    parser: argparse.ArgumentParser
    help: str = ""
    children: list[Command] = field(default_factory=list)

    @property
    def name(self) -> str:
        return " ".join(self.words)

    def walk(self) -> Iterator[Command]:
        yield self
        for child in self.children:
            yield from child.walk()


def command_tree(parser: argparse.ArgumentParser, words: list[str], help: str = "") -> Command:
    node = Command(words, parser, help)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                node.children.append(command_tree(sub, [*words, name], helps.get(name, "")))
    return node


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions
            if not isinstance(a, argparse._SubParsersAction) and a.help != argparse.SUPPRESS]


def expand_help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help:
        return ""
    return parser._get_formatter()._expand_help(action)


# -- roff ---------------------------------------------------------------------------------

def roff(text: str) -> str:
    """Plain text as roff: backslashes escaped, double backticks as bold, no line starting
    with a control character."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    text = re.sub(r"``([^`]+)``", r"\\fB\1\\fR", text)
    text = re.sub(r"`([^`]+)`", r"\\fB\1\\fR", text)
    return "\n".join("\\&" + line if line.startswith((".", "'")) else line
                     for line in text.splitlines())


def paragraphs(text: str) -> str:
    """A docstring or description: blank lines become paragraph breaks; lines indented
    (a table, an example) are kept as they are."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n", text.strip("\n")):
        lines = block.splitlines()
        if any(line.startswith("  ") for line in lines):
            out.append(".PP\n.nf\n" + roff("\n".join(lines)) + "\n.fi")
        else:
            out.append(".PP\n" + roff(" ".join(line.strip() for line in lines)))
    return "\n".join(out)


def option_label(action: argparse.Action) -> str:
    if not action.option_strings:
        return "\\fI" + roff(action.metavar or action.dest).upper() + "\\fR"
    label = ", ".join("\\fB" + roff(s) + "\\fR" for s in action.option_strings)
    if action.nargs != 0:
        if action.choices is not None:
            metavar = "{" + ",".join(str(c) for c in action.choices) + "}"
        else:
            metavar = action.metavar or action.dest.upper()
        label += " \\fI" + roff(str(metavar)) + "\\fR"
    return label


def options_section(parser: argparse.ArgumentParser) -> str:
    out = []
    for action in options(parser):
        out.append(".TP\n" + option_label(action) + "\n" + roff(expand_help(parser, action)))
    return "\n".join(out)


def synopsis(parser: argparse.ArgumentParser) -> str:
    usage = parser.format_usage().removeprefix("usage: ").strip()
    return ".PP\n" + roff(" ".join(usage.split()))


def manpage(root: Command, section: int, version: str, summary: str,
            extra: dict[str, str]) -> str:
    parser = root.parser
    description = parser.description or ""
    out = [
        f'.TH {root.name.upper()} {section} "" "{root.name} {version}" '
        f'"{"System Administration" if section == 8 else "User Commands"}"',
        ".SH NAME",
        f"{root.name} \\- {roff(summary)}",
        ".SH SYNOPSIS",
        synopsis(parser),
        ".SH DESCRIPTION",
        paragraphs(description),
    ]
    if extra.get("DESCRIPTION"):
        out.append(paragraphs(extra["DESCRIPTION"]))
    out += [".SH OPTIONS", options_section(parser)]
    commands = [c for c in root.walk() if c is not root]
    if commands:
        out.append(".SH COMMANDS")
        for command in commands:
            out.append(f'.SS "{roff(command.name)}"')
            if command.help:
                out.append(roff(command.help))
            out.append(synopsis(command.parser))
            text = command.parser.description
            if text and text.strip() != command.help.strip():
                out.append(paragraphs(text))
            if command.children:
                names = ", ".join(f"\\fB{roff(c.words[-1])}\\fR" for c in command.children)
                out.append(f".PP\nSubcommands: {names}.")
            opts = options_section(command.parser)
            if opts:
                out.append(opts)
    for title, text in extra.items():
        if title != "DESCRIPTION":
            out += [f".SH {title}", paragraphs(text)]
    return "\n".join(part for part in out if part) + "\n"


# -- completion ---------------------------------------------------------------------------

def bash_completion(root: Command) -> str:
    """A bash completion function: the words typed so far pick the (sub)command; offered
    are its subcommands and options, an option's choices after it, or file names after an
    option that takes a value."""
    fn = "_" + root.name.replace("-", "_")
    known = [c for c in root.walk() if c is not root]
    step = "\n".join(f'            "{c.name}") path="{c.name}" ;;' for c in known)
    words_cases, value_cases = [], []
    for command in root.walk():
        words = [c.words[-1] for c in command.children]
        for action in options(command.parser):
            words += action.option_strings
            if action.option_strings and action.nargs != 0:
                pattern = "|".join(f'"{command.name}|{s}"' for s in action.option_strings)
                if action.choices is not None:
                    choices = " ".join(str(c) for c in action.choices)
                    value_cases.append(
                        f'        {pattern}) COMPREPLY=($(compgen -W "{choices}" -- "$cur")); '
                        "return ;;")
                else:
                    value_cases.append(
                        f'        {pattern}) COMPREPLY=($(compgen -f -- "$cur")); return ;;')
        words_cases.append(f'        "{command.name}") words="{" ".join(words)}" ;;')
    return f"""# bash completion for {root.name} (generated by deploy/manpages.py from its parser)
{fn}() {{
    local cur prev path words i
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    path="{root.name}"
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "$path ${{COMP_WORDS[i]}}" in
{step or '            "") ;;'}
        esac
    done
    case "$path|$prev" in
{chr(10).join(value_cases) or '        "") ;;'}
    esac
    case "$path" in
{chr(10).join(words_cases)}
    esac
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
}}
complete -o default -F {fn} {root.name}
"""


ZSH = """#compdef amcast amcastd
# zsh completion for amcast and amcastd: the bash completion (generated by
# deploy/manpages.py from their parsers), loaded through bashcompinit.
autoload -U +X bashcompinit && bashcompinit
source {dirs}/amcast && source {dirs}/amcastd
_bash_complete -F _${{words[1]:t}} "$@"
"""


# -- the two programs ---------------------------------------------------------------------

def parsers() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    from amcast.daemon.main import build_parser as amcastd_parser

    from amcast.cli import build_parser as amcast_parser

    return amcast_parser(), amcastd_parser()


def module_doc_after(module_doc: str, marker: str) -> str:
    return module_doc.split(marker, 1)[1].strip() if marker in module_doc else ""


def generate(out: Path) -> list[Path]:
    import amcast.daemon.main

    import amcast.cli
    from amcast import __version__

    amcast_parser, amcastd_parser = parsers()
    amcast_tree = command_tree(amcast_parser, ["amcast"])
    amcastd_tree = command_tree(amcastd_parser, ["amcastd"])
    cli_doc = amcast.cli.__doc__ or ""
    daemon_doc = amcast.daemon.main.__doc__ or ""
    amcast_parser.epilog = None  # the exit statuses get their own section
    files = {
        out / "man1" / "amcast.1": manpage(
            amcast_tree, 1, __version__, "send, receive and inspect atomic multicast",
            {
                "DESCRIPTION": "Each command talks to the local amcastd through its unix "
                               "socket (--socket, default $AMCAST_SOCKET), or runs locally "
                               "(cluster, demo, simulate, analyze, keygen; bench runs the "
                               "benchmarks of a source checkout, which are not installed).",
                "EXIT STATUS": "  " + cli_doc.split("never a traceback:\n\n", 1)[1].strip(),
                "SEE ALSO": "amcastd(8)",
            }),
        out / "man8" / "amcastd.8": manpage(
            amcastd_tree, 8, __version__, "the amcast atomic multicast daemon",
            {
                "DESCRIPTION": "Settings come from the TOML file given with --config (or "
                               "$AMCAST_CONFIG), each overridable by an environment "
                               "variable AMCAST_SECTION__KEY (AMCAST_NODE__ID=2). A commented "
                               "default configuration is installed as "
                               "/etc/amcast/amcastd.toml; the systemd unit amcastd.service "
                               "runs it as user amcast.",
                "EXIT STATUS": module_doc_after(daemon_doc, "\n\n").split("\n\n")[0]
                .removeprefix("Exit status: ").replace("\n", " "),
                "FILES": "  /etc/amcast/amcastd.toml   configuration\n"
                         "  /run/amcast/amcastd.sock   the API socket (group amcast)\n"
                         "  /var/log/amcast            logs\n"
                         "  /var/lib/amcast            the membership state file",
                "SEE ALSO": "amcast(1), systemd.service(5)",
            }),
        out / "bash-completion" / "amcast": bash_completion(amcast_tree),
        out / "bash-completion" / "amcastd": bash_completion(amcastd_tree),
        out / "zsh" / "_amcast": ZSH.format(
            dirs="/usr/share/bash-completion/completions"),
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return list(files)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python deploy/manpages.py OUTDIR", file=sys.stderr)
        return 2
    for path in generate(Path(argv[0])):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
