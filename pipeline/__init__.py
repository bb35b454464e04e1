"""What the turbotfx pipeline is and how it is run, in floors: a module imports from its
own floor and the ones below, never from one above (tests/test_architecture.py checks).

  ground      errors (user-fixable errors), atomic (files that appear whole), schemas/
              (curated schemas), store/url (store URLs, pure Python)
  config      config (PipelineConfig), data (input CSV, checks), synthetic
  definition  pipeline (create_pipeline), deployment (local vs compiled), vertex;
              store/connection (the MLMD store, ml_metadata)
  use         runners/ (local, kubeflow, submit, Beam settings), provenance/ (questions
              answered from MLMD: lineage, runs, diff, summary, render)
  cli/        the `turbotfx` command line: the only floor that prints

Keras 2 (tf_keras) is what TFT and TFMA expect: pin it before any import touches tf.keras.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
