"""Pytest plugin: `--shuffle SEED` runs the tests in a random order, so a test that depends
on another's leftovers fails. The same seed gives the same order.

Modules are shuffled, then the tests inside each module. Tests that share a parameter of a
module- or session-scoped fixture (one backend's pipeline runs, say) stay together, as
pytest itself groups them: otherwise that fixture would be built again for every switch.
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
    modules: dict[str, dict[tuple, list[pytest.Item]]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], {}).setdefault(_shared_parameters(item), []).append(item)
    order = []
    for groups in _shuffled(shuffler, list(modules.values())):
        for group in _shuffled(shuffler, list(groups.values())):
            order.extend(_shuffled(shuffler, group))
    items[:] = order


def _shared_parameters(item: pytest.Item) -> tuple:
    """The item's parameters of fixtures that live longer than one test."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return ()
    definitions = item._fixtureinfo.name2fixturedefs
    return tuple(sorted((name, index) for name, index in callspec.indices.items()
                        if definitions.get(name) and definitions[name][-1].scope != "function"))


def _shuffled(shuffler: random.Random, values: list) -> list:
    shuffler.shuffle(values)
    return values
