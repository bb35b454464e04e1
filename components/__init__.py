"""Custom TFX pieces, one package each.

Two are components of their own (component.py and executor.py): anomaly_gate, which stops
the run when ExampleValidator found anomalies, and serving_check, which loads and queries
the candidate the way TF Serving will. Three are executors swapped into stock TFX
components: reporting_trainer (Trainer), reporting_evaluator (Evaluator) and atomic_pusher
(Pusher). Each that records something in MLMD (all but anomaly_gate) has a keys.py: the
names of its settings and of what it records. keys.py imports no TFX, so the CLI and the
provenance queries read it without loading TFX. Their tests are in tests/.

Keras 2 (tf_keras) is what TFT and TFMA expect: pin it before any import touches tf.keras.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
