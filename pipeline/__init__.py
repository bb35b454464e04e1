"""What the turbotfx pipeline is and how it is run, in floors (each imports only from the
floors below it):

  ground      errors (user-fixable errors), atomic (files that appear whole), schemas/
              (curated schemas), config (PipelineConfig), data, synthetic
  definition  pipeline (create_pipeline), deployment (local vs compiled), vertex
  store/      the MLMD store: url (pure Python), connection (ml_metadata; one run at a time)
  runners/    local, kubeflow (compile), submit, beam_args, beam_tuning
  provenance/ questions answered from MLMD: lineage, runs, diff, summary, render
  cli/        the `turbotfx` command line: the only floor that prints

Keras 2 (tf_keras) is what TFT and TFMA expect: pin it before any import touches tf.keras.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
