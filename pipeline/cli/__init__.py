"""The `turbotfx` command line: flags in, one call into the library floors, text out. The
only part of turbotfx that prints.

  main        the top-level parser and dispatch
  args        flags several commands share, and the config, workspace and store they name
  console     the quiet console (library output to the log file)
  init        `init`                     run         `run`
  deploy      `compile`, `submit`
  provenance  `lineage`, `runs`, `diff`  serve       `serving ...`, `predict`
  score       `score`                   drift       `drift`
  schema      `schema infer`            tune        `tune show`
  report      `report`                  reference   docs/cli.md from the parsers

Every command module has `add_parser(commands)` and a handler, and imports TensorFlow,
TFX, Beam and ml_metadata only inside the handler: `turbotfx --help` stays fast.
"""

from pipeline.cli.main import main

__all__ = ["main"]
