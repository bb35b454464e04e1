"""What the turbotfx pipeline is and how it is run, in floors: a module imports from its
own floor and the ones below, never from one above (tests/test_architecture.py checks).

  ground      errors (user-fixable errors, message helpers), atomic (files that appear
              whole), private (owner-only files for what a command writes), store/url (store URLs, pure Python), store/integrity and store/backup
              (a SQLite store checked; its last good copy), store/study (the tuning
              study's storage reached before a run), datasets/ (the only data
              package: dataset files loaded and validated, the built-ins; table: the user's
              CSV or Parquet files as ExampleGen reads them; checks: the checks before a
              run; infer and draft: what `turbotfx init` decides and writes; prepare: a
              run's input generated or checked; synthetic: the generator)
  config      config (PipelineConfig)
  definition  pipeline (create_pipeline), deployment (local vs compiled), vertex;
              store/connection (the MLMD store, ml_metadata)
  use         runners/ (local, kubeflow, submit, Beam settings), provenance/ (MLMD read
              and the pipeline's own records in it: graph, lineage, summary, verdict, runs,
              diff, render, pushes, run_state), report/ (the run's report page: records,
              files, charts, page, write), workspace (a workspace's life as library
              calls: the store held and checked, runs left unfinished marked, serving
              reconciled with MLMD, one pipeline run start to end; never prints),
              serving_labels (`serving promote | rollback | status` as library calls
              that never print: the labels changed or read, checked against MLMD first)
              scoring/ (`turbotfx score` as library calls that never print: tables
              scored with a served version on Beam, written whole or not at all)
  cli/        the `turbotfx` command line: the only floor that prints

components/ stands between config and definition: below the definition, pipeline/ imports
only its contracts (*/keys.py, csv_example_gen/dialect.py), import-free names both sides share.

Keras 2 (tf_keras) is what TFT and TFMA expect: pin it before any import touches tf.keras.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
