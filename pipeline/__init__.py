"""What the turbotfx pipeline is and how it is run.

Keras 2 (tf_keras) is what TFT and TFMA expect: pin it before any import touches tf.keras.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
