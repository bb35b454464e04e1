"""TrainingConfig: every training knob once, with its default, choices, check and flag.

The flags of `run` and `compile`, a dataset file's [training] table, the Trainer's
custom_config (so MLMD, lineage and diff) and run_fn all derive from these fields: a knob
added here appears in each. No TensorFlow import: the CLI and the pipeline's config read it.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Mapping

from trainer_module import hardware, optimizer_choice
from trainer_module.dimensions import Choice, Dimension, Range

# The file run_fn writes into model_run, which the Trainer's executor copies onto the Model.
REPORT_FILE = "training_report.json"
# The model families run_fn trains: a Keras MLP (model.py) or TF-DF gradient-boosted trees (gbt.py).
MODEL_FAMILIES = ("dnn", "gbt")
# The knob a compiled pipeline takes as a runtime parameter (a runtime parameter cannot
# live inside the custom_config dict): the Trainer's executor writes it back under this name.
RUNTIME_KNOB = "epochs"
CLASS_WEIGHTS = ("none", "balanced")
# bag_folds 0 (auto): small train splits train this many bagged models; above BAG_MAX_ROWS
# rows one model (bagging multiplies training time; docs/quality.md measured what it buys).
AUTO_BAG_FOLDS = 5
BAG_MAX_ROWS = 20_000
MAX_BAG_FOLDS = 20
NUMERIC_ENCODINGS = ("zscore", "plr")


def knob(default: Any, help: str, *, flag: str | None = None, choices: tuple[str, ...] = (),
         per_dataset: bool = False, has_flag: bool = True, search: Dimension | None = None) -> Any:
    """A TrainingConfig field. help may quote {default}. flag: its name when not the field's
    (`--field-name`). per_dataset: a knob a dataset file sets ([training] that `init` writes;
    the flag's help quotes each built-in's value; lineage shows it first). search: the values
    a Tuner tries (trainer_module/search_space.py; a gbt_ knob's for the gbt family)."""
    return dataclasses.field(default=default, metadata={
        "help": help, "flag": flag, "choices": choices, "per_dataset": per_dataset, "has_flag": has_flag,
        "search": search})


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    epochs: int = knob(100, "the most training epochs; early stopping on the validation slice usually ends "
                            "sooner (default: {default})", per_dataset=True)
    batch_size: int = knob(32, "training batch size per replica (default: {default})", per_dataset=True,
                           search=Choice((16, 32, 64, 128, 256)))
    learning_rate: float = knob(0.01, "Adam learning rate (default: {default})", per_dataset=True,
                                search=Range(3e-4, 3e-2, log=True))
    # A dataset file's only: no flag. The Tuner searches width and depth together.
    hidden_units: tuple[int, ...] = knob((32, 16), "units of each hidden layer", per_dataset=True, has_flag=False,
                                         search=Choice(((32, 16), (64, 32), (128, 64), (256, 128), (64,),
                                                        (128, 64, 32))))
    # Model quality: the defaults are what benchmarks/quality_bench.py measured best (docs/quality.md).
    validation_share: float = knob(0.1, "share of the train split held out to stop training early and keep the "
                                        "best epoch's weights; 0 trains every epoch (default: {default})")
    patience: int = knob(10, "epochs without a better validation loss before training stops "
                             "(default: {default})")
    bag_folds: int = knob(0, "train this many models, each stopping early on its own fold of the train split, "
                             "and serve their average (k-fold bagging); 1 trains one model on the validation "
                             f"slice; 0 picks: {AUTO_BAG_FOLDS} for train splits up to {BAG_MAX_ROWS:,} rows, "
                             "else 1 (default: {default})")
    weight_decay: float = knob(1e-4, "decoupled weight decay of the dense layers (AdamW; default: {default})",
                               search=Range(1e-6, 1e-2, log=True))
    dropout: float = knob(0.3, "dropout rate after each hidden layer (default: {default})",
                          search=Range(0.0, 0.5))
    dropout_max_rows: int = knob(100_000, "dropout applies while the train split has at most this many rows; "
                                          "larger tables train without it (0: always; default: {default})")
    class_weight: str = knob("none", "classification: weigh each class by its inverse frequency (balanced), "
                                     "trading accuracy for the minority classes' recall (default: {default})",
                             choices=CLASS_WEIGHTS, per_dataset=True)
    linear: bool = knob(True, "wide and deep: the output layer also reads the features, so the model is a "
                              "linear one plus the hidden layers' correction (default: on)")
    numeric_encoding: str = knob("zscore", "how the model reads numbers: zscore as Transform scales them, or "
                                           "plr, periodic embeddings learned per feature (default: {default})",
                                 choices=NUMERIC_ENCODINGS, search=Choice(NUMERIC_ENCODINGS))
    # Trainer hardware: each "auto" is resolved from the devices the Trainer sees.
    strategy: str = knob("auto", "tf.distribute strategy for the Trainer (default: {default}, from the devices)",
                         choices=hardware.STRATEGIES)
    precision: str = knob("auto", "Keras mixed-precision policy for training (default: {default})",
                          choices=hardware.PRECISIONS)
    xla: str = knob("auto", "XLA-compile the training step (default: {default}: on for GPU/TPU, "
                            "off with a sparse-aware optimizer)", choices=hardware.XLA_MODES)
    optimizer: str = knob("auto", "training optimizer: adam, or lazy_adam / adagrad_adam, which update only "
                                  "the embedding rows a batch touches (default: {default}: "
                                  f"{optimizer_choice.SPARSE_DEFAULT} when the model has embeddings, else adam)",
                          choices=optimizer_choice.OPTIMIZERS)
    # Chosen by benchmarks/trainer_bench.py (see docs/speed.md).
    steps_per_execution: int = knob(32, "training steps per tf.function call (default: {default})")
    accumulation_steps: int = knob(1, "micro-batches per optimizer step (gradient accumulation; "
                                      "default: {default})")
    scale_learning_rate: bool = knob(False, "multiply the learning rate by the number of replicas (linear scaling)")
    tensorboard_histogram_freq: int = knob(5, "epochs between TensorBoard weight histograms, 0 for none "
                                              "(default: {default})", flag="--histogram-freq")
    profile_batches: str = knob("", "TensorBoard-profile batches START,END, 1 <= START <= END, e.g. 2,4")
    # The model family, and the gbt family's knobs (TF-DF's defaults; a dataset file's [model]
    # table sets them too). The knobs above that shape an MLP's training do not apply to gbt.
    model_family: str = knob("dnn", "model family: dnn (a Keras MLP) or gbt (TF-DF gradient-boosted trees) "
                                    "(default: {default})", flag="--model", choices=MODEL_FAMILIES)
    gbt_num_trees: int = knob(300, "gbt: most trees (early stopping on a validation slice of the train split "
                                   "may keep fewer; default: {default})", search=Range(100, 1000, log=True))
    gbt_max_depth: int = knob(6, "gbt: maximum tree depth (default: {default})", search=Range(3, 8))
    gbt_shrinkage: float = knob(0.1, "gbt: learning rate of the boosting (default: {default})",
                                search=Range(0.02, 0.3, log=True))

    def __post_init__(self) -> None:
        # A list from TOML or JSON: the field holds a tuple, so configs compare and hash.
        for field in dataclasses.fields(self):
            if isinstance(field.default, tuple):
                object.__setattr__(self, field.name, tuple(getattr(self, field.name)))

    def validate(self) -> None:
        """Raises ValueError naming the first knob out of range (pipeline.config turns it
        into the ConfigError a user sees)."""
        for field, allowed in knob_choices(type(self)).items():
            value = getattr(self, field)
            _require(value in allowed, f"unknown {field} {value!r}; choose one of: {', '.join(allowed)}")
        _require(self.steps_per_execution >= 1,
                 f"steps per execution must be at least 1, got {self.steps_per_execution}")
        _require(self.accumulation_steps >= 1,
                 f"accumulation steps must be at least 1, got {self.accumulation_steps}")
        _require(self.batch_size % self.accumulation_steps == 0,
                 f"batch size {self.batch_size} must be a multiple of accumulation steps "
                 f"{self.accumulation_steps} (each step trains on an equal micro-batch)")
        _require(self.tensorboard_histogram_freq >= 0,
                 f"histogram frequency must be 0 or more, got {self.tensorboard_histogram_freq}")
        _require(_profile_range_ok(self.profile_batches),
                 f"profile batches {self.profile_batches!r} must be START,END with 1 <= START <= END "
                 "(Keras counts training batches from 1), e.g. 2,4; or empty for no profiling")
        _require(self.epochs >= 1, f"epochs must be at least 1, got {self.epochs}")
        _require(self.batch_size >= 1, f"batch size must be at least 1, got {self.batch_size}")
        _require(0 < self.learning_rate < 10,
                 f"learning rate must be in (0, 10), got {self.learning_rate}")
        _require(0 <= self.validation_share < 0.5,
                 f"validation share must be in [0, 0.5), got {self.validation_share}")
        _require(self.patience >= 1, f"patience must be at least 1, got {self.patience}")
        _require(0 <= self.bag_folds <= MAX_BAG_FOLDS,
                 f"bag folds must be in [0, {MAX_BAG_FOLDS}] (0 picks by the table's size), got {self.bag_folds}")
        _require(0 <= self.weight_decay < 1, f"weight decay must be in [0, 1), got {self.weight_decay}")
        _require(0 <= self.dropout < 1, f"dropout must be in [0, 1), got {self.dropout}")
        _require(self.dropout_max_rows >= 0, f"dropout max rows must be 0 or more, got {self.dropout_max_rows}")
        _require(self.gbt_num_trees >= 1, f"gbt num trees must be at least 1, got {self.gbt_num_trees}")
        _require(self.gbt_max_depth >= 1, f"gbt max depth must be at least 1, got {self.gbt_max_depth}")
        _require(0 < self.gbt_shrinkage <= 1, f"gbt shrinkage must be in (0, 1], got {self.gbt_shrinkage}")
        _require(len(self.hidden_units) >= 1 and all(u >= 1 for u in self.hidden_units),
                 f"hidden units must be positive integers, got {self.hidden_units}")

    def to_config(self) -> dict[str, Any]:
        """The Trainer's custom_config entries: one per knob, named as the field, JSON types
        (a tuple as a list). Runs recorded before TrainingConfig hold the same keys and types,
        so lineage and diff across them show no change."""
        return {field.name: _json(getattr(self, field.name)) for field in dataclasses.fields(self)}

    @classmethod
    def from_config(cls, custom_config: Mapping[str, Any]) -> TrainingConfig:
        """The knobs in a Trainer's custom_config (other entries ignored); a missing one takes
        its default."""
        return cls(**{field.name: coerce(field, custom_config[field.name])
                      for field in dataclasses.fields(cls) if field.name in custom_config})


# The Tuner's best_hyperparameters file: {"values": {knob: value}} (KerasTuner's shape), which
# the Trainer's executor hands to run_fn as fn_args.hyperparameters.
TUNED_VALUES = "values"


def training_of(fn_args: Any) -> TrainingConfig:
    """The knobs a Trainer trains with: its custom_config's, with a tuning result's values
    (fn_args.hyperparameters, from the Tuner or the latest reusable result) over them."""
    tuned = (getattr(fn_args, "hyperparameters", None) or {}).get(TUNED_VALUES, {})
    return TrainingConfig.from_config({**(fn_args.custom_config or {}), **tuned})


def bag_folds(training: TrainingConfig, train_rows: int) -> int:
    """The models run_fn trains and averages: bag_folds, or with 0 the size rule; one model
    where no validation slice is wanted (validation_share 0)."""
    if training.bag_folds:
        return training.bag_folds
    if training.validation_share == 0 or train_rows > BAG_MAX_ROWS:
        return 1
    return AUTO_BAG_FOLDS


def dropout_rate(training: TrainingConfig, train_rows: int) -> float:
    """The dropout a run trains with: none once the train split outgrows dropout_max_rows
    (regularising a large table bought no accuracy, and the random draws cost about a third
    of a training step: docs/speed.md)."""
    if training.dropout_max_rows and train_rows > training.dropout_max_rows:
        return 0.0
    return training.dropout


def knob_choices(config_class: type[TrainingConfig] = TrainingConfig) -> dict[str, tuple[str, ...]]:
    return {field.name: field.metadata["choices"] for field in dataclasses.fields(config_class)
            if field.metadata.get("choices")}


def dataset_knobs(config_class: type[TrainingConfig] = TrainingConfig) -> tuple[str, ...]:
    """The knobs a dataset file sets: `init` writes them, lineage shows them first."""
    return tuple(field.name for field in dataclasses.fields(config_class) if field.metadata.get("per_dataset"))


def dataset_defaults(config_class: type[TrainingConfig] = TrainingConfig) -> dict[str, Any]:
    """The dataset knobs at their defaults, in JSON types: the [training] `init` writes."""
    defaults = config_class().to_config()
    return {name: defaults[name] for name in dataset_knobs(config_class)}


def value_kind(field: dataclasses.Field) -> type | tuple[type, ...]:
    """The TOML or JSON type a knob's value comes as: a float knob takes a whole number
    too, a tuple knob a list."""
    default = field.default
    if isinstance(default, float):
        return (int, float)
    if isinstance(default, tuple):
        return list
    return type(default)


def coerce(field: dataclasses.Field, value: Any) -> Any:
    """value as the knob's type (custom_config comes back from JSON)."""
    default: Any = field.default  # every knob has a plain default (no default_factory)
    if isinstance(default, tuple):
        return tuple(type(default[0])(item) for item in value)
    return type(default)(value)


def _json(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _profile_range_ok(text: str) -> bool:
    """What the Trainer's Keras TensorBoard callback profiles: batches START to END, counted
    from 1 (it refuses END < START; START 0 would never match a batch)."""
    if text == "":
        return True
    match = re.fullmatch(r"(\d+),(\d+)", text)
    return match is not None and 1 <= int(match[1]) <= int(match[2])


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)
