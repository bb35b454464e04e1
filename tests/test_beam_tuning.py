"""Beam settings for local runs change how fast Beam runs, never what it finds: with the
signature cache on, Beam reads the same arguments, defaults and state specs as without it."""

from __future__ import annotations

import base64
import contextlib
import functools
import types
from typing import Iterator

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions, TypeOptions
from apache_beam.testing import util as beam_testing
from apache_beam.transforms import core, userstate
from apache_beam.transforms.core import CallableWrapperDoFn
from apache_beam.typehints import decorators

from pipeline.runners import beam_tuning

COUNT = userstate.ReadModifyWriteStateSpec("count", beam.coders.VarIntCoder())


class _Stateful(beam.DoFn):
    def process(self, element, count=beam.DoFn.StateParam(COUNT), timestamp=beam.DoFn.TimestampParam):  # noqa: B008 (Beam's idiom)
        yield element


class _Plain(beam.DoFn):
    def process(self, element, prefix="p"):
        yield prefix + element


def _function(a, b=2, *rest, c=3):
    return a


def _callables():
    return [_function, _Plain().process, _Stateful().process, functools.partial(_function, 1), len,
            lambda x, y=1: x, str.upper]


@contextlib.contextmanager
def _beam_as_is() -> Iterator[None]:
    """Beam's own introspection, whatever this process tuned before (a run, the suite's
    session): the values the cached ones are checked against."""
    targets = [(decorators, "get_signature"), (core, "get_signature"), (userstate, "get_dofn_specs")]
    saved = [(module, name, getattr(module, name)) for module, name in targets]
    for module, name, function in saved:
        setattr(module, name, getattr(function, "uncached", function))
    try:
        yield
    finally:
        for module, name, function in saved:
            setattr(module, name, function)


@pytest.fixture
def cached():
    with _beam_as_is():
        uncached = [(decorators.get_signature(f), core.get_function_args_defaults(f)) for f in _callables()]
        uncached_specs = [userstate.get_dofn_specs(d) for d in (_Stateful(), _Plain())]
    beam_tuning.cache_signatures()
    yield uncached, uncached_specs


def test_cached_signatures_are_the_uncached_ones(cached) -> None:
    uncached, _ = cached
    assert decorators.get_signature is core.get_signature is not getattr(core.get_signature, "uncached", None)
    for _ in range(2):  # the second round reads from the cache
        assert [(decorators.get_signature(f), core.get_function_args_defaults(f)) for f in _callables()] == uncached
    # A bound method's signature has no `self`; the function's own keeps it.
    assert list(core.get_signature(_Plain().process).parameters) == ["element", "prefix"]
    assert list(core.get_signature(_Plain.process).parameters) == ["self", "element", "prefix"]


def test_state_and_timer_specs_are_still_found(cached) -> None:
    _, uncached_specs = cached
    for _ in range(2):
        specs = [userstate.get_dofn_specs(d) for d in (_Stateful(), _Plain())]
        assert specs == uncached_specs
    assert specs[0] == ({COUNT}, set())
    assert userstate.is_stateful_dofn(_Stateful()) and not userstate.is_stateful_dofn(_Plain())


def test_a_mapped_function_keeps_its_own_arguments(cached) -> None:
    # Map/FlatMap wrap the user's function: its arguments, not the wrapper's, are read.
    first = CallableWrapperDoFn(lambda x, factor=2: [x * factor])
    second = CallableWrapperDoFn(lambda y, offset=5, scale=1: [y + offset])
    assert core.get_function_arguments(first, "process") == (["x", "factor"], [2])
    assert core.get_function_arguments(second, "process") == (["y", "offset", "scale"], [5, 1])


def test_a_pipeline_gives_the_same_result_with_the_cache() -> None:
    # Every in-memory setting at once, as a run has them: cached signatures and specs, bare pickles.
    beam_tuning.tune("in_memory")
    try:
        with beam.Pipeline() as pipeline:
            counted = (pipeline | beam.Create([("a", 1), ("b", 2), ("a", 3)])
                       | beam.ParDo(_Counting()) | beam.combiners.ToList())
            beam_testing.assert_that(
                counted, lambda rows: _equal(sorted(rows[0]), [("a", 1), ("a", 2), ("b", 1)]))
    finally:
        beam_tuning.compress_pickles(True)


class _Counting(beam.DoFn):
    """Counts the elements of each key: works only if the state parameter is found."""

    def process(self, element, count=beam.DoFn.StateParam(COUNT)):  # noqa: B008 (Beam's idiom)
        seen = (count.read() or 0) + 1
        count.write(seen)
        yield element[0], seen


def _equal(actual, expected) -> None:
    assert actual == expected, actual


def test_cached_option_views_read_and_write_the_options_they_come_from() -> None:
    flags = ["--direct_num_workers=3", "--runner=DirectRunner", "--no_pipeline_type_check"]
    expected = {cls: PipelineOptions(flags).view_as(cls).get_all_options()
                for cls in (TypeOptions, DirectOptions, StandardOptions)}
    beam_tuning.cache_option_views()
    options = PipelineOptions(flags)
    for cls, values in expected.items():
        assert options.view_as(cls).get_all_options() == values
    assert options.view_as(DirectOptions).direct_num_workers == 3
    assert options.view_as(TypeOptions).pipeline_type_check is False
    # A value set through one view is seen through every view and the options themselves.
    options.view_as(DirectOptions).direct_num_workers = 5
    assert options.view_as(DirectOptions).direct_num_workers == 5
    assert options.get_all_options()["direct_num_workers"] == 5
    # Each options object has views of its own.
    other = PipelineOptions(["--direct_num_workers=1"])
    assert other.view_as(DirectOptions).direct_num_workers == 1
    assert options.view_as(DirectOptions).direct_num_workers == 5


class _TwoTimestamps(beam.DoFn):
    def process(self, element, first=beam.DoFn.TimestampParam, second=beam.DoFn.TimestampParam):  # noqa: B008
        yield element


def _stateful_by_hand() -> beam.DoFn:
    """A _Plain whose process is _Stateful's, set on the instance: its class says nothing."""
    dofn = _Plain()
    dofn.process = types.MethodType(_Stateful.process, dofn)  # type: ignore[method-assign]
    return dofn


def test_remembered_dofn_specs_are_each_dofns_own() -> None:
    dofns = [_Stateful(), _Plain(), _stateful_by_hand(), CallableWrapperDoFn(lambda x: [x])]
    with _beam_as_is():
        uncached = [userstate.get_dofn_specs(d) for d in dofns]
    assert uncached[:3] == [({COUNT}, set()), (set(), set()), ({COUNT}, set())], uncached
    beam_tuning.cache_dofn_specs()
    for order in (dofns, dofns[::-1], dofns):  # each answer its own, whichever was asked first
        assert [userstate.get_dofn_specs(d) for d in order] == [uncached[dofns.index(d)] for d in order]
    assert [userstate.is_stateful_dofn(d) for d in dofns[:3]] == [True, False, True]
    for _ in range(2):  # an invalid DoFn raises each time it is asked about, not only the first
        with pytest.raises(ValueError, match="duplicate process method parameters"):
            userstate.get_dofn_specs(_TwoTimestamps())


def test_pickles_stay_uncompressed_only_for_this_process() -> None:
    from apache_beam.internal import dill_pickler, pickler

    value = {"fn": _function, "rows": list(range(100)), "text": "x" * 1000}
    try:
        beam_tuning.tune("in_memory")
        beams_own_loads = dill_pickler.loads.beams_own  # what a worker process with Beam as is runs
        plain = pickler.dumps(value)
        assert base64.b64decode(plain)[:1] == b"\x80", "a bare pickle"
        assert pickler.loads(plain) == value
        with pytest.raises(OSError):  # why a run whose workers are other processes compresses
            beams_own_loads(plain)
        beam_tuning.tune("multi_process")
        compressed = pickler.dumps(value)
        assert base64.b64decode(compressed)[:3] == b"BZh", "bz2, as Beam writes it"
        assert beams_own_loads(compressed) == value
        assert pickler.loads(compressed) == value
    finally:
        beam_tuning.compress_pickles(True)
