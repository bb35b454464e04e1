"""The shape of the code: the import graph between our own modules (from their source, not
by importing them) has no circle and no arrow that points back up, and the modules the
CLI starts from load no heavy library."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests import REPO

PACKAGES = ("pipeline", "serving", "components", "trainer_module")
HEAVY = ("tensorflow", "tfx", "apache_beam", "ml_metadata", "tensorflow_transform",
         "tensorflow_model_analysis", "tensorflow_data_validation", "kfp")


def module_files() -> dict[str, Path]:
    """Every module of the product packages by dotted name; benchmark scripts by path."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            modules[name] = path
    for path in sorted((REPO / "benchmarks").glob("*.py")):
        modules[f"benchmarks/{path.name}"] = path
    return modules


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Our modules that `name` imports anywhere in its source (function bodies too): for
    `from a.b import c`, a.b.c when that is a module, else a.b."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against this module's package
                package = name.split(".") if is_package else name.split(".")[:-1]
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                       for alias in node.names]
        else:
            continue
        found.update(target for target in targets if target in known)
    found.discard(name)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = module_files()
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_is_read_from_the_source():
    graph = import_graph()
    # Known edges: if these are not found, the reader is broken and the checks below are vacuous.
    assert "pipeline.cli.args" in graph["pipeline.cli.run"]
    assert "pipeline.workspace" in graph["pipeline.cli.run"]  # inside the handler
    assert "pipeline.store.url" in graph["pipeline.config"]
    assert "serving.contract" in graph["serving.warmup"]
    assert "pipeline.provenance.lineage" in graph["pipeline.cli.provenance"]  # inside the handler
    assert "pipeline.serving_labels" in graph["pipeline.cli.serve"]  # inside the handler


def test_the_circle_finder_finds_circles():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_between_our_modules():
    assert circles(import_graph()) == []


@pytest.mark.parametrize("package", ["serving", "components", "trainer_module"])
def test_the_library_floors_never_import_the_cli(package):
    graph = import_graph()
    upward = sorted(f"{name} -> {target}" for name, targets in graph.items() if name.startswith(package)
                    for target in targets if target.startswith("pipeline.cli"))
    assert upward == []


# pipeline/'s floors, lowest first (pipeline/__init__.py draws the same map): a module may
# import its own floor and the ones below, never one above.
PIPELINE_FLOORS = (
    ("pipeline", "pipeline.errors", "pipeline.atomic", "pipeline.private", "pipeline.store", "pipeline.store.url",
     "pipeline.datasets"),
    ("pipeline.config",),
    ("pipeline.store.connection", "pipeline.deployment", "pipeline.vertex", "pipeline.pipeline"),
    ("pipeline.runners", "pipeline.provenance", "pipeline.report", "pipeline.workspace",
     "pipeline.serving_labels", "pipeline.scoring"),
    ("pipeline.cli",),
)


def floor_of(module: str) -> int | None:
    """The floor of one of pipeline's modules: the longest prefix named in PIPELINE_FLOORS."""
    best = None
    for floor, prefixes in enumerate(PIPELINE_FLOORS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
                best = (floor, len(prefix))
    return None if best is None else best[0]


def test_every_pipeline_module_has_a_floor():
    assert [m for m in import_graph() if m.startswith("pipeline") and floor_of(m) is None] == []
    assert floor_of("pipeline.store.url") == 0 and floor_of("pipeline.store.connection") == 2
    assert floor_of("pipeline.cli.args") == 4
    assert floor_of("pipeline.workspace") == floor_of("pipeline.provenance.graph") == 3
    assert floor_of("pipeline.serving_labels") == 3  # beside workspace, whose reconciliation it calls


def test_pipeline_imports_only_its_own_floor_or_below():
    graph = import_graph()
    upward = sorted(f"{name} -> {target}" for name, targets in graph.items() if name.startswith("pipeline")
                    for target in targets if target.startswith("pipeline") and floor_of(target) > floor_of(name))
    assert upward == []


# serving/ is a library under the product: it knows the user-fixable error and the atomic
# write, never a dataset file or a config (its callers turn those into a RowSchema).
SERVING_MAY_IMPORT = ("pipeline.errors", "pipeline.atomic")


def test_serving_uses_only_errors_and_atomic_of_pipeline():
    graph = import_graph()
    upward = sorted(f"{name} -> {target}" for name, targets in graph.items() if name.startswith("serving")
                    for target in targets if target.startswith("pipeline") and target not in SERVING_MAY_IMPORT)
    assert upward == []
    assert "pipeline.errors" in graph["serving.errors"]  # the rule sees serving's imports


# The contracts of components/ that the data checks and the pipeline's settings share: names
# and rules without TFX (each is in LIGHT_MODULES).
COMPONENT_CONTRACTS = ("components.csv_example_gen.dialect", "components.parquet_example_gen.formats",
                       "components.csv_example_gen.arrow_read")


def is_contract(module: str) -> bool:
    return module.endswith(".keys") or module in COMPONENT_CONTRACTS


def test_pipelines_ground_floors_import_only_the_contracts_of_components():
    # The floors under the definition (ground, config) stay under components/: from the
    # definition up, pipeline/ puts the components in the pipeline and imports them.
    graph = import_graph()
    definition = floor_of("pipeline.pipeline")
    assert sorted(f"{name} -> {target}" for name, targets in graph.items()
                  if name.startswith("pipeline") and floor_of(name) < definition
                  for target in targets if target.startswith("components") and not is_contract(target)) == []
    assert "components.csv_example_gen.dialect" in graph["pipeline.datasets.table"]
    # A contract stands on nothing of ours (and, by LIGHT_MODULES, on no heavy library).
    assert {contract: graph[contract] for contract in COMPONENT_CONTRACTS} == {c: set() for c in COMPONENT_CONTRACTS}


def test_components_import_nothing_from_pipeline():
    # pipeline.pipeline puts them in the pipeline: an arrow back would tie them to the CLI's package.
    graph = import_graph()
    assert sorted(f"{name} -> {target}" for name, targets in graph.items() if name.startswith("components")
                  for target in targets if target.startswith("pipeline")) == []


def test_trainer_module_imports_nothing_of_ours_but_itself():
    graph = import_graph()
    outside = sorted(f"{name} -> {target}" for name, targets in graph.items() if name.startswith("trainer_module")
                     for target in targets if not target.startswith("trainer_module"))
    assert outside == []


def test_benchmarks_import_no_test_code():
    for path in sorted((REPO / "benchmarks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not [n for n in names if n == "tests" or n.startswith("tests.")], path.name


LIGHT_MODULES = ("pipeline.cli", "pipeline.errors", "pipeline.config", "pipeline.datasets", "pipeline.store.url",
                 "serving.contract", "serving.rows",
                 "components.reporting_trainer.keys", "components.reporting_evaluator.keys",
                 "components.serving_check.keys", "components.atomic_pusher.keys",
                 "components.serving_check.loader_process", "trainer_module.config",
                 "pipeline.datasets.table", "pipeline.datasets.checks", "components.csv_example_gen.dialect",
                 "components.parquet_example_gen.formats", "components.csv_example_gen.arrow_read")


@pytest.mark.parametrize("module", LIGHT_MODULES)
def test_light_modules_load_no_heavy_library(module):
    """`turbotfx --help` and the names both sides share must not pay for TensorFlow, TFX,
    Beam or ml_metadata (seconds of start-up each)."""
    code = (f"import json, sys; import {module}; "
            f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({list(HEAVY)!r}))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
