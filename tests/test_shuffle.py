"""The --shuffle plugin: a seed gives one order, modules stay together, and a parameter of
a longer-lived fixture is set up once however the tests are shuffled."""

from __future__ import annotations

import re

import pytest

MODULE = '''
import pytest

@pytest.fixture(scope="module", params=["a", "b"])
def backend(request):
    with open("setups.txt", "a") as setups:
        setups.write(f"{__name__} {request.param}\\n")
    return request.param

@pytest.fixture(scope="module", params=[1, 2])
def size(request):
    with open("setups.txt", "a") as setups:
        setups.write(f"{__name__} size {request.param}\\n")
    return request.param

@pytest.mark.parametrize("case", range(3))
def test_with_a_backend(backend, size, case):
    pass

@pytest.mark.parametrize("case", range(6))
def test_plain(case):
    pass
'''


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_first=MODULE, test_second=MODULE)
    return pytester


def order(suite: pytest.Pytester, *args: str) -> list[str]:
    """The tests in the order they ran; fails unless each backend was set up once per module
    and the sizes nested inside it."""
    setups = suite.path / "setups.txt"
    setups.unlink(missing_ok=True)
    result = suite.runpytest("-p", "tests.shuffle", "-v", *args)
    result.assert_outcomes(passed=2 * (2 * 2 * 3 + 6))
    lines = setups.read_text().split("\n")[:-1]
    assert sorted(line for line in lines if " size " not in line) == [
        "test_first a", "test_first b", "test_second a", "test_second b"]
    # The inner parameter changes at most once per (backend, size) group, as in pytest's order.
    for module in ("test_first", "test_second"):
        assert len([line for line in lines if line.startswith(f"{module} size ")]) <= 4, lines
    return re.findall(r"^(test_\S+) PASSED", result.stdout.str(), re.MULTILINE)


def test_the_same_seed_gives_the_same_order_and_another_seed_another(suite):
    in_file_order = order(suite)
    shuffled = order(suite, "--shuffle", "1")
    assert shuffled == order(suite, "--shuffle", "1")
    assert sorted(shuffled) == sorted(in_file_order)
    assert len({tuple(order(suite, "--shuffle", str(seed))) for seed in range(2, 6)} | {tuple(shuffled)}) > 1
    assert shuffled != in_file_order


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_modules_stay_together(suite, seed):
    modules = [test.split("::")[0] for test in order(suite, "--shuffle", str(seed))]
    switches = sum(1 for a, b in zip(modules, modules[1:]) if a != b)
    assert switches == 1, modules


PLAIN_MODULE = '''
import pytest

@pytest.mark.parametrize("case", range(4))
def test_one(case):
    pass

def test_two():
    pass

def test_three():
    pass
'''
MODULES = [f"test_mod{number}" for number in range(5)]  # collected in this (file name) order
TESTS_PER_MODULE = [f"test_one[{case}]" for case in range(4)] + ["test_two", "test_three"]


def collected(pytester: pytest.Pytester, *args: str) -> list[str]:
    """The test ids in the order --collect-only lists them (the order they would run in)."""
    result = pytester.runpytest("-p", "tests.shuffle", "--collect-only", "-q", *args)
    assert result.ret == 0, result.stdout.str()
    return re.findall(r"^(test_mod\d\.py::\S+)$", result.stdout.str(), re.MULTILINE)


def test_shuffle_reorders_whole_modules_and_keeps_each_module_complete(pytester):
    pytester.makepyfile(**{module: PLAIN_MODULE for module in MODULES})
    in_file_order = [f"{module}.py::{test}" for module in MODULES for test in TESTS_PER_MODULE]
    assert collected(pytester) == in_file_order

    module_orders = set()
    for seed in range(1, 6):
        shuffled = collected(pytester, "--shuffle", str(seed))
        assert shuffled == collected(pytester, "--shuffle", str(seed)), f"seed {seed} gave two orders"
        assert sorted(shuffled) == sorted(in_file_order), seed
        # Each module's tests run as one block, all of them.
        blocks = [shuffled[start:start + len(TESTS_PER_MODULE)]
                  for start in range(0, len(shuffled), len(TESTS_PER_MODULE))]
        modules = [block[0].split(".py::")[0] for block in blocks]
        for module, block in zip(modules, blocks):
            assert sorted(block) == sorted(f"{module}.py::{test}" for test in TESTS_PER_MODULE), (seed, shuffled)
        assert sorted(modules) == MODULES
        module_orders.add(tuple(modules))

    # The modules themselves come in another order than the files' (not only the tests
    # inside each module), and different seeds give different module orders.
    assert module_orders - {tuple(MODULES)}, module_orders
    assert len(module_orders) > 1, module_orders
