"""run_fn for the TFX Trainer: the model family the run chose trains (config.MODEL_FAMILIES):
a Keras MLP (train.py) or TF-DF gradient-boosted trees (gbt.py), on the same Transform
output, exported with the same signatures."""

from __future__ import annotations

from tfx.components.trainer.fn_args_utils import FnArgs

from trainer_module import config


def run_fn(fn_args: FnArgs) -> None:
    training = config.training_of(fn_args)
    if training.model_family == "gbt":
        # Only a gbt run pays for importing TF-DF.
        from trainer_module import gbt

        gbt.run_fn(fn_args, training)
        return
    from trainer_module import train

    train.run_fn(fn_args)
