"""Code given by import path carries its source hash into the cache keys."""

from __future__ import annotations

import ast
from pathlib import Path

import trainer_module
from pipeline import pipeline


def _trainer_module_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "trainer_module":
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("trainer_module."):
            names.add(node.module.split(".", 1)[1])
    return names


def test_transform_fingerprint_covers_everything_preprocessing_imports():
    package = Path(trainer_module.__file__).parent
    pending, seen = ["preprocessing"], set()
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        pending.extend(_trainer_module_imports(package / f"{module}.py"))
    assert {f"{m}.py" for m in seen} <= set(pipeline.TRANSFORM_SOURCES)


def test_the_trainer_fingerprint_covers_more_than_transform_s():
    whole = pipeline.code_fingerprint()
    transform_only = pipeline.code_fingerprint(pipeline.TRANSFORM_SOURCES)
    assert whole != transform_only
    assert pipeline.code_fingerprint(pipeline.TRANSFORM_SOURCES) == transform_only
