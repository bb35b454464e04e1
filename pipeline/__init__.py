"""What the turbotfx pipeline is and how it is run, in floors: a module imports from its
own floor and the ones below, never from one above (tests/test_architecture.py checks).

  ground      errors (user-fixable errors), atomic (files that appear whole), schemas
              (curated schemas as ImportSchemaGen reads them), store/url (store URLs, pure
              Python), store/integrity and store/backup (a SQLite store checked; its last
              good copy), datasets/ (dataset files: load, validate, the built-ins; infer:
              what `turbotfx init` decides), tables (the user's CSV or Parquet files, checks)
  config      config (PipelineConfig), data (a run's input: generated or checked), synthetic
  definition  pipeline (create_pipeline), deployment (local vs compiled), vertex;
              store/connection (the MLMD store, ml_metadata)
  use         runners/ (local, kubeflow, submit, Beam settings), provenance/ (MLMD read
              and the pipeline's own records in it: graph, lineage, summary, verdict, runs,
              diff, render, pushes, run_state), workspace (a workspace's life as library
              calls: the store held and checked, runs left unfinished marked, serving
              reconciled with MLMD, one pipeline run start to end; never prints)
  cli/        the `turbotfx` command line: the only floor that prints

Keras 2 (tf_keras) is what TFT and TFMA expect: pin it before any import touches tf.keras.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
