"""Process-level settings that keep Beam's own overheads from dominating local runs on small data.

Each skips work that costs time in this process and adds nothing to the result:

  skip_dill_tracing              Beam's pickler toggling dill's trace logging around every
                                 object, each toggle clearing every logger's level cache
  cache_signatures               Beam reading the signature of every method of a DoFn
                                 again each time it looks for state and timer parameters
  cache_option_views             Beam building an argument parser and parsing the flags
                                 again for each view of the pipeline options it takes
  cache_dofn_specs               Beam walking every method of a DoFn for state and timer
                                 parameters each time it asks whether the DoFn is stateful
  disable_in_memory_state_cache  the in-memory worker's state cache walking every imported
                                 module's globals to weigh each side input it holds
  compress_pickles(False)        Beam compressing each pickled DoFn with bz2 at level 9 (to
                                 keep a remote runner's protos small) and decompressing it
                                 again, where the pickle never leaves this process

On `turbotfx run` over penguins these overheads are about a third of the run. The settings
change how fast Beam runs in this process, never what it computes. `tune` applies them for
a Beam mode: the state cache and the compression are turned off only in-memory, and the
compression back on for any other mode (its workers are other processes, with Beam as is).
"""

from __future__ import annotations

import base64
import inspect
import types
import weakref
from typing import Any, Hashable


def skip_dill_tracing() -> None:
    """Stops Beam's pickler from toggling dill's trace logging around every object.

    Each toggle is a Logger.setLevel, which clears the level cache of every logger in the
    process (thousands once TF and the Google clients are imported): ~11,000 toggles per
    run. The trace only adds per-object debug lines to the log.
    """
    import dill._dill

    dill._dill._trace = lambda boolean: None


def cache_signatures() -> None:
    """Remembers the signature of each function Beam introspects.

    Beam checks a DoFn for state and timer parameters by reading the signature of every
    method it has (DoFn's own included, dozens) when the ParDo is built, serialized and
    turned into each bundle's operations: inspect.signature was a fifth of a penguins run.
    A function's signature is fixed when it is defined, so it is read once per function
    (a bound method: once per function too, less its first parameter, as inspect does).
    Anything but a plain function or method is read each time, as before.
    """
    from apache_beam.transforms import core
    from apache_beam.typehints import decorators

    read = getattr(decorators.get_signature, "uncached", decorators.get_signature)
    known: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def get_signature(func) -> inspect.Signature:
        bound = isinstance(func, types.MethodType)
        function = func.__func__ if bound else func
        if not isinstance(function, types.FunctionType):
            return read(func)
        signatures = known.setdefault(function, {})
        if bound not in signatures:
            signatures[bound] = read(func)
        return signatures[bound]

    get_signature.uncached = read  # type: ignore[attr-defined]  # mypy models no function attributes
    decorators.get_signature = core.get_signature = get_signature


def cache_option_views() -> None:
    """Gives the same view of a PipelineOptions object each time it is asked for one.

    Pipeline.apply takes two views of the options (type checks) for every transform it
    applies, and each view builds an argparse parser and parses the flags again: thousands
    of times per penguins run. A view holds no values of its own: it reads and writes the
    options it was taken from (their shared `_all_options`), and the flags it parses never
    change, so a view taken once answers as a new one would.
    """
    from apache_beam.options.pipeline_options import PipelineOptions

    view_as = getattr(PipelineOptions.view_as, "uncached", PipelineOptions.view_as)
    views: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def cached_view_as(self, cls):
        of_these = views.setdefault(self, {})
        if cls not in of_these:
            of_these[cls] = view_as(self, cls)
        return of_these[cls]

    cached_view_as.uncached = view_as  # type: ignore[attr-defined]  # as get_signature.uncached above
    cached_view_as.__doc__ = view_as.__doc__
    PipelineOptions.view_as = cached_view_as  # type: ignore[method-assign]  # the point: a patched method


def cache_dofn_specs() -> None:
    """Remembers the state and timer specs found for each kind of DoFn.

    Beam asks whether a DoFn is stateful (and validates its specs) thousands of times per
    penguins run, each time building a wrapper for every method the DoFn has. The specs are
    the defaults of those methods' parameters, fixed when the functions are defined, so
    they are read once per DoFn class, set of method functions and wrapped function (Map's
    and FlatMap's DoFn reads the arguments of the function it wraps). A DoFn whose key
    cannot be hashed is read each time, as before; an invalid one raises each time.
    """
    from apache_beam.transforms import userstate

    read = getattr(userstate.get_dofn_specs, "uncached", userstate.get_dofn_specs)
    known: dict[Hashable, Any] = {}

    def get_dofn_specs(dofn):
        key = _dofn_key(dofn)
        if key is None:
            return read(dofn)
        if key not in known:
            known[key] = read(dofn)
        return known[key]

    get_dofn_specs.uncached = read  # type: ignore[attr-defined]  # as get_signature.uncached above
    userstate.get_dofn_specs = get_dofn_specs


def _dofn_key(dofn) -> Hashable | None:
    methods = []
    for name in dir(dofn):
        method = getattr(dofn, name, None)
        if isinstance(method, types.MethodType):
            methods.append((name, method.__func__))
    wrapped = getattr(dofn, "_process_argspec_fn", None)
    key = (type(dofn), tuple(methods), wrapped() if callable(wrapped) else None)
    try:
        hash(key)
    except TypeError:
        return None
    return key


# bz2 and zlib streams start with b"BZh" and b"x"; a pickle of protocol 2 or later with \x80.
_PICKLE_START = b"\x80"
_compressing = True


def compress_pickles(on: bool) -> None:
    """Whether Beam's pickler compresses what it pickles (it always reads both kinds).

    Beam pickles each DoFn several times a run (to check it when the ParDo is built, into
    the pipeline's proto, into each bundle's operations) and compresses each pickle with
    bz2 at level 9; the in-memory DirectRunner reads them back in this same process, where
    the compression only costs time. Workers in other processes (multi-process, a cluster)
    run Beam as is and read only compressed pickles: turn it back on before such a run.
    """
    global _compressing
    from apache_beam.internal import dill_pickler

    if not hasattr(dill_pickler.dumps, "beams_own"):
        compressed_dumps, any_loads = dill_pickler.dumps, dill_pickler.loads

        def dumps(o, enable_trace=True, use_zlib=False) -> bytes:
            if _compressing:
                return compressed_dumps(o, enable_trace=enable_trace, use_zlib=use_zlib)
            import dill

            with dill_pickler._pickle_lock:
                return base64.b64encode(dill.dumps(o, byref=dill_pickler.settings["dill_byref"]))

        def loads(encoded, enable_trace=True, use_zlib=False):
            if base64.b64decode(encoded[:4]).startswith(_PICKLE_START):
                import dill

                with dill_pickler._pickle_lock:
                    return dill.loads(base64.b64decode(encoded))
            return any_loads(encoded, enable_trace=enable_trace, use_zlib=use_zlib)

        dumps.beams_own, loads.beams_own = compressed_dumps, any_loads  # type: ignore[attr-defined]
        dill_pickler.dumps, dill_pickler.loads = dumps, loads
    _compressing = on


def disable_in_memory_state_cache() -> None:
    """Turns off the in-memory DirectRunner worker's state cache.

    Caching a side input weighs it with objsize, which first collects the globals of
    every imported module to exclude them: a walk over all of sys.modules per side-input
    read, a third of Transform's time with the cache on. Without the cache, side inputs are
    read straight from the runner's in-memory state, which is what the cache would hold anyway.
    """
    from apache_beam.runners.portability.fn_api_runner import worker_handlers

    worker_handlers.STATE_CACHE_SIZE_MB = 0


def tune(mode: str) -> None:
    skip_dill_tracing()
    cache_signatures()
    cache_option_views()
    cache_dofn_specs()
    compress_pickles(mode != "in_memory")
    if mode == "in_memory":
        disable_in_memory_state_cache()
