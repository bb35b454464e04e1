"""Code that runs inside Transform and Trainer.

TFT sets TF_USE_LEGACY_KERAS=1 on import and expects Keras 2; `tf.keras` binds on first
use, so the variable is set here, before anything in this package can touch it.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
