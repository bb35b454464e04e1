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
