"""Process-level settings that keep Beam's own overheads from dominating local runs on small data.

Each skips work that costs time in this process and adds nothing to the result:

  skip_dill_tracing              Beam's pickler toggling dill's trace logging around every
                                 object, each toggle clearing every logger's level cache
  disable_in_memory_state_cache  the in-memory worker's state cache walking every imported
                                 module's globals to weigh each side input it holds

On `turbotfx run` over penguins these overheads are about a third of the run. The settings
change how fast Beam runs in this process, never what it computes. `tune` applies them for
a Beam mode: the state cache is turned off only in-memory.
"""

from __future__ import annotations


def skip_dill_tracing() -> None:
    """Stops Beam's pickler from toggling dill's trace logging around every object.

    Each toggle is a Logger.setLevel, which clears the level cache of every logger in the
    process (thousands once TF and the Google clients are imported): ~11,000 toggles per
    run. The trace only adds per-object debug lines to the log.
    """
    import dill._dill

    dill._dill._trace = lambda boolean: None


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
    if mode == "in_memory":
        disable_in_memory_state_cache()
