"""Pytest plugin: `--shuffle SEED` runs the tests in a random order, so a test that depends
on another's leftovers fails. The same seed gives the same order.

Modules are shuffled, then the tests inside each module. Tests that share a parameter of a
module- or session-scoped fixture (one backend's pipeline runs, say) stay together, nested
as pytest itself groups them: otherwise that fixture would be built again at every switch.
"""

from __future__ import annotations

import random

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--shuffle", type=int, metavar="SEED", default=None,
                     help="run the tests in an order shuffled with this seed")


def pytest_report_header(config: pytest.Config) -> str | None:
    seed = config.getoption("shuffle")
    return None if seed is None else f"test order shuffled with seed {seed} (--shuffle {seed})"


@pytest.hookimpl(trylast=True)  # after pytest has grouped the tests by fixture parameters
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seed = config.getoption("shuffle")
    if seed is None:
        return
    shuffler = random.Random(seed)
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    order: list[pytest.Item] = []
    for module_items in _shuffled(shuffler, list(modules.values())):
        order.extend(_nested(shuffler, module_items, _outermost_first(module_items)))
    items[:] = order


def _nested(shuffler: random.Random, items: list[pytest.Item], names: list[str]) -> list[pytest.Item]:
    """items grouped by the value of names[0] (groups shuffled), each group likewise by the
    next name, the innermost groups shuffled item by item."""
    if not names:
        return _shuffled(shuffler, list(items))
    groups: dict[int | None, list[pytest.Item]] = {}
    for item in items:
        groups.setdefault(_long_lived_parameters(item).get(names[0]), []).append(item)
    nested = []
    for group in _shuffled(shuffler, list(groups.values())):
        nested.extend(_nested(shuffler, group, names[1:]))
    return nested


def _outermost_first(items: list[pytest.Item]) -> list[str]:
    """The module's long-lived parameters, the one pytest's own order changes least first:
    that is the one pytest set up outermost."""
    changes: dict[str, int] = {}
    previous: dict[str, int | None] = {}
    for item in items:
        parameters = _long_lived_parameters(item)
        for name in set(parameters) | set(previous):
            changes[name] = changes.get(name, 0) + (parameters.get(name) != previous.get(name))
        previous = parameters
    return sorted(changes, key=lambda name: (changes[name], name))


def _long_lived_parameters(item: pytest.Item) -> dict[str, int]:
    """The item's parameter indices that live longer than one test: of a module- or
    session-scoped fixture, or given to @parametrize with such a scope."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return {}
    return {name: index for name, index in callspec.indices.items() if _scope(item, callspec, name) != "function"}


def _scope(item: pytest.Item, callspec, name: str) -> str:
    scope = getattr(callspec, "_arg2scope", {}).get(name)  # set for @parametrize(scope=...)
    if scope is not None:
        return getattr(scope, "value", str(scope))
    definitions = item._fixtureinfo.name2fixturedefs.get(name)
    return definitions[-1].scope if definitions else "function"


def _shuffled(shuffler: random.Random, values: list) -> list:
    shuffler.shuffle(values)
    return values
