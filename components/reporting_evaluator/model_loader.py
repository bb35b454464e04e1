"""The Evaluator's model loader: TFMA's own, with TF-DF's ops registered first
(serving/forest_ops.py), in this process and in every Beam worker process that loads the
model (multi_process runs load it in worker processes, which import this module when they
unpickle the loader)."""

from __future__ import annotations

from typing import Any, Callable

import tensorflow_model_analysis as tfma

from serving import forest_ops

# The TFX Evaluator takes `custom_eval_shared_model` from the module its exec property
# module_path names (the executor sets it to this module).
MODULE_PATH = __name__


def custom_eval_shared_model(eval_saved_model_path: str, model_name: str, eval_config: Any,
                             **kwargs: Any) -> tfma.types.EvalSharedModel:
    shared = tfma.default_eval_shared_model(eval_saved_model_path=eval_saved_model_path, model_name=model_name,
                                            eval_config=eval_config, **kwargs)
    loader = shared.model_loader
    return shared._replace(model_loader=tfma.types.ModelLoader(
        construct_fn=ForestOpsFirst(eval_saved_model_path, loader.construct_fn), tags=loader.tags))


class ForestOpsFirst:
    """A construct_fn that registers TF-DF's ops (when the model uses them) before TFMA's
    loads the model; a class, so Beam pickles it by reference to this module."""

    def __init__(self, model_path: str, construct_fn: Callable[[], Any]) -> None:
        self.model_path = model_path
        self.construct_fn = construct_fn

    def __call__(self) -> Any:
        forest_ops.register_for(self.model_path)
        return self.construct_fn()
