"""Custom TFX pieces, one package each.

Three are components of their own (component.py and executor.py): anomaly_gate, which stops
the run when ExampleValidator found anomalies, serving_check, which loads and queries
the candidate the way TF Serving will, and tuner, which runs an Optuna study of the training
knobs for the Trainer's hyperparameters input (worker.py: one more process on the study;
strategy.py: the Resolver that reuses the latest result over the same search space). Five are executors swapped into stock TFX
components: csv_example_gen (CsvExampleGen: the header read as Python's csv module reads
it, byte-order mark and quotes included), parquet_example_gen (FileBasedExampleGen: zeros
kept, dates and timestamps as ISO text by formats.py), reporting_trainer (Trainer),
reporting_evaluator (Evaluator) and atomic_pusher (Pusher). baseline_model is the Resolver strategy behind the Evaluator's baseline (the
latest blessed and pushed model, never the candidate). Each that records something in MLMD
has a keys.py: the names of its settings and of what it records. keys.py imports no TFX,
so the CLI and the provenance queries read it without loading TFX. Their tests are in tests/.

Keras 2 (tf_keras) is what TFT and TFMA expect: pin it before any import touches tf.keras.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
