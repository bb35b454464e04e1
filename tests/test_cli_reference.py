"""The docs hold to the code: docs/cli.md is what the parser renders today, every `--flag` the
README and docs/ mention is an option of some command (or of a named other tool), and every
relative link lands on a file and a heading that exist. Light: no TensorFlow, no pipeline run."""

from __future__ import annotations

import difflib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli import reference
from tests import REPO
from tests.test_architecture import HEAVY

CLI_PAGE = REPO / "docs" / "cli.md"
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
REGENERATE = f".venv/bin/{reference.REGENERATE}"

# Flags the docs may name that no turbotfx command has. Ours but not the CLI's: the file that
# defines each, which must still define it (so the list cannot outlive the flag).
DEFINED_IN = {
    "--shuffle": "tests/shuffle.py",  # pytest, through `make test ARGS=...`
    "--tables": "benchmarks/quality_bench.py",
    "--workdir": "benchmarks/quality_bench.py",
    "--modes": "benchmarks/scale_bench.py",
    "--sizes": "benchmarks/scale_bench.py",
    "--columns": "benchmarks/columns_bench.py",
    "--only": "benchmarks/trainer_bench.py",
    "--write": "pipeline/cli/reference.py",  # regenerates docs/cli.md
}
# Other programs' flags, named where the docs pass them through or describe what runs.
OTHER_TOOLS = {
    "--model_config_file": "TF Serving",
    "--max_num_workers": "Beam's Dataflow runner (through --beam-arg)",
    "--sdk_container_image": "Beam",
    "--service_port": "Beam's worker pool (python -m pipeline.runners.worker_pool)",
    "--stat": "git show",
    "--durations": "pytest (the Makefile's test targets)",
    "--no-loadscope-reorder": "pytest-xdist (the Makefile's test targets)",
}
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*```")


def test_docs_cli_md_is_what_the_parser_renders():
    written, rendered = CLI_PAGE.read_text(), reference.render()
    if written != rendered:
        diff = difflib.unified_diff(written.splitlines(keepends=True), rendered.splitlines(keepends=True),
                                    "docs/cli.md", "the parser today", n=1)
        pytest.fail(f"docs/cli.md is stale: regenerate it with `{REGENERATE}`\n" + "".join(list(diff)[:60]))


def test_the_reference_reads_the_same_on_every_machine(monkeypatch, tmp_path):
    page = reference.render()
    # A narrow terminal and a workspace and jar cache elsewhere change nothing on the page.
    monkeypatch.setenv("COLUMNS", "37")
    monkeypatch.setenv("TURBOTFX_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TURBOTFX_CLUSTER_CACHE", str(tmp_path / "cache"))
    assert reference.render() == page
    # Nor does any path of this machine: a folder's path with its separator ("gs://bucket/root"
    # is not the home /root).
    for here in (REPO, Path.home(), tmp_path):
        assert here == Path("/") or f"{here}/" not in page, here


def test_the_reference_has_every_command_and_option():
    page = reference.render()
    for nested in ("### turbotfx serving promote", "### turbotfx tune show", "### turbotfx schema infer",
                   "## turbotfx run", "## turbotfx compile"):
        assert f"\n{nested}\n" in page
    listed = set(re.findall(r"^- `([^`]+)`", page, re.MULTILINE))
    flags = {flag for entry in listed for flag in FLAG.findall(entry)}
    assert reference.option_strings() - {"-h", "--help", "-v"} <= flags


def test_building_the_reference_loads_no_heavy_library():
    code = ("import json, sys; from pipeline.cli import reference; reference.render(); "
            f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({list(HEAVY)!r}))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_every_flag_the_docs_mention_exists():
    options = reference.option_strings()
    unknown = sorted(f"{page.relative_to(REPO)}:{number}: {flag}"
                     for page in PAGES for number, line in enumerate(page.read_text().splitlines(), 1)
                     for flag in FLAG.findall(line)
                     if flag not in options and flag not in DEFINED_IN and flag not in OTHER_TOOLS)
    assert unknown == [], ("flags no turbotfx command has (a typo, or a flag that was renamed or removed; "
                           "another tool's goes into this test's lists):\n" + "\n".join(unknown))


@pytest.mark.parametrize("flag", sorted(DEFINED_IN))
def test_a_flag_of_our_other_programs_is_still_defined_there(flag):
    assert f'"{flag}"' in (REPO / DEFINED_IN[flag]).read_text()


def _lines_outside_code(path: Path) -> list[str]:
    lines, fenced = [], False
    for line in path.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as
    hyphens, a repeated one numbered."""
    found: set[str] = set()
    for line in _lines_outside_code(path):
        heading = re.match(r"#{1,6} (.+)", line)
        if not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading[1].strip().lower()).replace(" ", "-")
        numbered, n = slug, 0
        while numbered in found:
            n += 1
            numbered = f"{slug}-{n}"
        found.add(numbered)
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_lands(page):
    broken = []
    for line in _lines_outside_code(page):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{target}: no such file")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{target}: no heading with that anchor")
    assert broken == [], "\n".join(broken)
