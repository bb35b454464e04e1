"""docs/cli.md, the command-line reference, rendered from the argument parser itself: every
command's usage, description and options with their help, in Markdown. The prose pages link
here rather than repeat the flags, so a flag added to the parser is documented by
regenerating, and tests/test_cli_reference.py fails while the file is stale.

    python -m pipeline.cli.reference --write     # or: > docs/cli.md

The page must read the same on every machine: usage is wrapped at a fixed width, not the
terminal's, and a default that argparse's help shows as a path of this machine is written
as the rule that picks it.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Iterator, Sequence

from pipeline.cli.main import build_parser

# Where `--write` puts the page: docs/ of the source tree this module is in.
DOCS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
REGENERATE = "python -m pipeline.cli.reference --write"
# Usage lines wrap here whatever the terminal (argparse reads $COLUMNS otherwise).
USAGE_WIDTH = 100

_HEADER = f"""# Command-line reference

<!-- Generated from the argument parser (pipeline/cli/) by `{REGENERATE}`.
     Do not edit by hand: tests/test_cli_reference.py fails when this file is stale. -->

Every `turbotfx` command with its usage and options, as `turbotfx COMMAND --help` prints them
(each also takes `-h`, `--help`). What the commands are for, with examples, is in the other
pages of [docs/](../README.md#where-to-go-next); this page is the complete list of flags.
"""


class _FixedWidth(argparse.HelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=USAGE_WIDTH)


def render() -> str:
    """The whole page, as `--write` writes it."""
    parser = build_parser()
    parts = [_HEADER]
    commands = list(_commands(parser, ()))
    parts.append("## Commands\n\n" + "\n".join(
        f"{'  ' * (len(path) - 1)}- [`turbotfx {' '.join(path)}`](#{_anchor(path)}): {_markdown(summary)}"
        for path, _, summary in commands) + "\n")
    parts += [_command(path, command, summary) for path, command, summary in commands]
    return "\n".join(parts)


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...]
              ) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser, str]]:
    """Every command under parser, depth first in the order --help lists them: its path
    (("serving", "promote")), its parser and the one-line help its parent gives it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            summaries = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, command in action.choices.items():
                yield (*path, name), command, summaries.get(name, "")
                yield from _commands(command, (*path, name))


def _command(path: tuple[str, ...], parser: argparse.ArgumentParser, summary: str) -> str:
    # argparse has no public API for one option's line; the private helpers used here and in
    # _option are the ones its own format_help calls, so the page says what --help says.
    parser.formatter_class = _FixedWidth
    formatter = parser._get_formatter()
    heading = "#" * min(len(path) + 1, 4)
    description = _markdown(parser.description or summary).rstrip(".")
    lines = [f"{heading} turbotfx {' '.join(path)}", "", description[:1].upper() + description[1:] + ".", "",
             "```text", parser.format_usage().rstrip(), "```"]
    for group in parser._action_groups:
        actions = [action for action in group._group_actions
                   if action.help is not argparse.SUPPRESS and not isinstance(action, argparse._HelpAction)]
        if not actions:
            continue
        lines += ["", f"{_group_title(group.title)}:", ""]
        for action in actions:
            lines.append(_option(action, formatter, path))
    return "\n".join(lines) + "\n"


def _group_title(title: str | None) -> str:
    # argparse's own titles are lower case; the page's headings are sentences.
    text = title or "options"
    return text[0].upper() + text[1:]


def _option(action: argparse.Action, formatter: argparse.HelpFormatter, path: tuple[str, ...]) -> str:
    if isinstance(action, argparse._SubParsersAction):
        names = ", ".join(f"[`{name}`](#{_anchor((*path, name))})" for name in action.choices)
        return f"- `{action.metavar or action.dest}`: one of {names}"
    invocation = formatter._format_action_invocation(action)
    required = " (required)" if action.required and action.option_strings else ""
    help_text = formatter._expand_help(action) if action.help else ""
    return f"- `{invocation}`{required}" + (f": {_markdown(_written(help_text))}" if help_text else "")


def _written(help_text: str) -> str:
    """A help text with the defaults that depend on this machine put as the rule that picks them."""
    from pipeline.runners.spark import jars

    live = str(jars.job_server_jar())
    return help_text.replace(live, f"{jars.LAUNCHER_JAR_NAME} in ${jars.CACHE_ENV_VAR}, else in "
                                   ".cache/cluster/spark/ of the source tree")


# Outside code spans: flags and environment variables become code (`--tune-study`,
# `$TURBOTFX_HOME`: two dollars on a line would read as math on GitHub); a < that would
# open an HTML tag (`<pipeline root>`) and a * are escaped.
_CODE_SPAN = re.compile(r"(`[^`]*`)")
_AS_CODE = re.compile(r"(?<![\w`])(--[a-z][\w-]*(?:=[^\s,;)]*)?|\$[A-Z][A-Z0-9_]*)")
_TAG_OPEN = re.compile(r"<(?=[A-Za-z/!?])")


def _markdown(text: str) -> str:
    """Help text (on one line) as Markdown."""
    pieces = _CODE_SPAN.split(" ".join(text.split()))
    return "".join(piece if piece.startswith("`") else
                   _AS_CODE.sub(r"`\1`", _TAG_OPEN.sub("&lt;", piece)).replace("*", r"\*")
                   for piece in pieces)


def _anchor(path: Sequence[str]) -> str:
    """The anchor GitHub gives the heading `turbotfx <path>`."""
    return "-".join(("turbotfx", *path))


def option_strings() -> set[str]:
    """Every option string of every command (`--no-linear` too): what the prose may mention."""
    found: set[str] = set()
    pending = [build_parser()]
    while pending:
        parser = pending.pop()
        for action in parser._actions:
            found.update(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                pending += action.choices.values()
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.cli.reference", description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"write {DOCS_PAGE.relative_to(DOCS_PAGE.parents[1])} "
                                                              "instead of printing the page")
    args = parser.parse_args(argv)
    page = render()
    if args.write:
        DOCS_PAGE.write_text(page)
        print(f"wrote {DOCS_PAGE}")
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
