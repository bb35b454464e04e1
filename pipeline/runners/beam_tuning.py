"""Process-level settings that keep Beam's own overheads from dominating local runs on small data.

Each skips work that costs time in this process and adds nothing to the result:

  skip_dill_tracing              Beam's pickler toggling dill's trace logging around every
                                 object, each toggle clearing every logger's level cache
  cache_signatures               Beam reading the signature of every method of a DoFn
                                 again each time it looks for state and timer parameters
  cache_option_views             Beam building an argument parser and parsing the flags
                                 again for each view of the pipeline options it takes
  disable_in_memory_state_cache  the in-memory worker's state cache walking every imported
                                 module's globals to weigh each side input it holds

On `turbotfx run` over penguins these overheads are about a third of the run. The settings
change how fast Beam runs in this process, never what it computes. `tune` applies them for
a Beam mode: the state cache is turned off only in-memory.
"""

from __future__ import annotations

import inspect
import types
import weakref


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
    if mode == "in_memory":
        disable_in_memory_state_cache()
