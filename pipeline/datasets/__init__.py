"""Dataset files: a table described in TOML (where it is, its label and task, each column's
role, the curated schema, slices, blessing thresholds, training defaults), validated on load.

The built-in datasets (penguins, synthetic) are such files in this folder; `--dataset` takes
a built-in's name or a file's path, and both take the same path through the code.

The package is the data wing; beside the dataset file (this module):
  table      the user's files as ExampleGen reads them: files, columns, the label, Arrow
             reads, the whole table typed, its statistics
  checks     the checks on those files before TFX sees them (columns, rows, the label)
  infer      `turbotfx init`'s decisions (roles, task, positive class, slices, blessing),
             and `turbotfx schema infer`
  profile    what those decisions look at in each column (types, values, words, dates,
             numbers and how they are written)
  leaks      the columns init sets aside because alone they give the label away
  draft      what `turbotfx init` writes: the dataset file's TOML, the schema draft
  prepare    a run's input: a built-in's rows written, the files checked, the curated
             schema copied by content
  synthetic  the synthetic dataset's generator (synthetic.toml describes its rows)
  names      the TF names columns become: two that clash, one the serving signature takes
  curated    the curated schema a dataset file names, checked when the file loads
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any, cast

import tomli

from components.reporting_evaluator import keys as evaluator_keys
from pipeline.datasets import curated
from pipeline.datasets.names import RESERVED_FIX, identifier_clash, reserved_name
from pipeline.errors import ConfigError
from serving.contract import EXAMPLES_INPUT
from trainer_module import config as training_config
from trainer_module.config import TrainingConfig
from trainer_module.features import (
    BINARY,
    MULTICLASS,
    NUMBER_FORMATS,
    REGRESSION,
    TASKS,
    Categorical,
    FeatureSpec,
)
from trainer_module.search_space import TuningConfig

BUILTIN_DIR = Path(__file__).resolve().parent
# A dataset, pipeline or model name: it names folders, MLMD contexts and TF Serving models.
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,62}$")
FORMATS = ("csv", "parquet")
ROLES = ("numeric", "categorical", "date", "text", "ignore")
# Where a built-in's rows come from when no data root is given (see prepare.py).
GENERATORS = ("penguins", "synthetic")
# Blessing metrics and which way is better; a task's metrics are the ones TFMA computes for it.
HIGHER_IS_BETTER = evaluator_keys.HIGHER_IS_BETTER
TASK_METRICS = {BINARY: ("accuracy", "auc"), MULTICLASS: ("accuracy",), REGRESSION: ("rmse", "mae")}
# A regression has no task-wide bound (it is in the label's units): `init` writes the
# label's standard deviation, the error of always predicting the mean.
DEFAULT_BLESSING: dict[str, dict[str, Any]] = {
    BINARY: {"metric": "auc", "threshold": 0.6, "max_drop": 0.02},
    MULTICLASS: {"metric": "accuracy", "threshold": 0.6, "max_drop": 0.02},
    REGRESSION: {"metric": "rmse", "threshold": None, "max_drop": None},
}

_TOP_KEYS = {"name", "data_root", "format", "label", "task", "classes", "positive", "schema", "slices",
             "generate", "rows", "features", "blessing", "training", "model", "tuning"}
# [tuning]: search_space.TuningConfig's fields, each of this kind.
TUNING_KEYS: dict[str, type | tuple[type, ...]] = {
    "trials": int, "minutes": (int, float), "knobs": list, "storage": str, "study": str, "parallelism": int}
# [model]: the model family and its knobs, each a TrainingConfig knob ([training] may name it too).
MODEL_KEYS = {"family": "model_family", "num_trees": "gbt_num_trees", "max_depth": "gbt_max_depth",
              "shrinkage": "gbt_shrinkage"}
_FEATURE_KEYS = {"role", "max_tokens", "frequency_threshold", "embedding_dim", "missing_values", "number_format"}
_KIND_NAMES = {int: "a whole number", float: "a number", str: "a quoted string", list: "a list [...]",
               dict: "a table", bool: "true or false"}


@dataclasses.dataclass(frozen=True)
class Feature:
    name: str
    role: str
    max_tokens: int | None = None
    frequency_threshold: int | None = None
    embedding_dim: int | None = None
    # numeric: text values that mean "no number here" (e.g. "T", a trace of rain), read as
    # missing with an indicator; the column is then held as text.
    missing_values: tuple[str, ...] = ()
    # numeric: numbers with digit grouping (a features.NUMBER_FORMATS name, e.g. "1,234.56");
    # the column is then held as text, as with missing_values.
    number_format: str | None = None


@dataclasses.dataclass(frozen=True)
class Blessing:
    metric: str
    threshold: float | None  # a lower bound, or an upper one for an error metric
    max_drop: float | None  # how much worse than the baseline a candidate may be; None: no check

    @property
    def higher_is_better(self) -> bool:
        return HIGHER_IS_BETTER[self.metric]


@dataclasses.dataclass(frozen=True)
class Dataset:
    name: str
    path: Path  # the dataset file
    data_root: Path | None  # None: a built-in generator writes the rows into the workspace
    format: str
    label: str
    task: str
    classes: int | None  # number of label values (classification)
    positive: str | None  # binary: the positive class's label value, as text
    schema: Path
    slices: tuple[str, ...]
    features: tuple[Feature, ...]
    blessing: Blessing
    training: TrainingConfig  # [training] over TrainingConfig's defaults
    generate: str | None = None
    rows: int | None = None  # synthetic rows by default
    tuning: TuningConfig = TuningConfig()  # [tuning]: no Tuner unless it asks for trials or minutes

    @property
    def model_features(self) -> tuple[Feature, ...]:
        return tuple(f for f in self.features if f.role != "ignore")

    @property
    def num_classes(self) -> int | None:
        return 2 if self.task == BINARY else self.classes

    def feature_spec(self) -> FeatureSpec:
        return FeatureSpec(
            dataset=self.name,
            task=self.task,
            label_key=self.label,
            positive=self.positive,
            numeric_keys=tuple(f.name for f in self.features if f.role == "numeric"),
            categoricals=tuple(
                Categorical(f.name, f.max_tokens, f.frequency_threshold, f.embedding_dim)
                for f in self.features if f.role == "categorical"
            ),
            date_keys=tuple(f.name for f in self.features if f.role == "date"),
            text_keys=tuple(f.name for f in self.features if f.role == "text"),
            missing_values=tuple((f.name, f.missing_values) for f in self.features
                                 if f.role == "numeric" and f.missing_values),
            number_formats=tuple((f.name, f.number_format) for f in self.features
                                 if f.role == "numeric" and f.number_format is not None),
        )

    def text(self) -> str:
        return self.path.read_text()

    def feature_contract(self) -> str:
        """A hash of what the model's signatures take and answer: every column of the curated
        schema with its type (the rows), and the label, task, classes and positive class (the
        answers). Two models with the same contract can score each other's eval rows (the
        Evaluator's baseline), whichever columns each uses as features."""
        from google.protobuf import text_format
        from tensorflow_metadata.proto.v0 import schema_pb2

        schema = text_format.Parse(self.schema.read_text(), schema_pb2.Schema())
        contract = {
            "columns": sorted([f.name, schema_pb2.FeatureType.Name(f.type)] for f in schema.feature),
            "label": self.label, "task": self.task, "classes": self.num_classes, "positive": self.positive,
        }
        return hashlib.sha256(json.dumps(contract, sort_keys=True).encode()).hexdigest()[:16]

    def fingerprint(self) -> str:
        """A hash of the file's bytes: what MLMD records to tell two versions apart."""
        return hashlib.sha256(self.path.read_bytes()).hexdigest()[:16]


def builtin_names() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in BUILTIN_DIR.glob("*.toml")))


def resolve(name_or_path: str) -> Path:
    """A built-in's file for its name, else the path given (which must exist)."""
    builtin = BUILTIN_DIR / f"{name_or_path}.toml"
    if "/" not in name_or_path and not name_or_path.endswith(".toml") and builtin.is_file():
        return builtin
    path = Path(name_or_path).expanduser()
    if not path.is_file():
        raise ConfigError(
            f"no dataset file {name_or_path!r}; give a built-in ({', '.join(builtin_names())}) or the "
            "path of a dataset file (write one with `turbotfx init --data-root DIR --label COLUMN`)"
        )
    return path.resolve()


def load(name_or_path: str) -> Dataset:
    """The dataset file, validated: any error names the file, the key and the fix."""
    path = resolve(name_or_path)
    return _builtin(path) if path.parent == BUILTIN_DIR else _load(path)


@functools.cache
def _builtin(path: Path) -> Dataset:
    """A built-in's file, read once per process: it is installed code, unchanged while we run
    (`--help` alone reads every built-in for its defaults)."""
    return _load(path)


def _load(path: Path) -> Dataset:
    try:
        raw = tomli.loads(path.read_text())
    except tomli.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML ({err}); fix the syntax") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file; give a TOML dataset file") from None
    return _Reader(path, raw).dataset()


class _Reader:
    """Reads one file's table, failing on the first problem with the file and key named."""

    def __init__(self, path: Path, raw: dict[str, Any]) -> None:
        self.path = path
        self.raw = raw

    def fail(self, key: str, problem: str, fix: str) -> ConfigError:
        return ConfigError(f"{self.path}: {key}: {problem}; {fix}")

    def unknown_keys(self, table: dict[str, Any], allowed: set[str], where: str) -> None:
        unknown = sorted(set(table) - allowed)
        if unknown:
            raise self.fail(f"{where}{unknown[0]}", "unknown key",
                            f"remove it or use one of: {', '.join(sorted(allowed))}")

    def get(self, table: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str = "",
            default: Any = ..., choices: tuple[str, ...] | None = None) -> Any:
        if key not in table:
            if default is ...:
                raise self.fail(f"{where}{key}", "missing", f"add {key} = ...")
            return default
        value = table[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        # TOML integers are fine where a float is wanted; booleans are not numbers here.
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            names = " or ".join(_KIND_NAMES[k] for k in kinds if k in _KIND_NAMES)
            raise self.fail(f"{where}{key}", f"{value!r} is not {names}", f"write {key} as {names}")
        if choices is not None and value not in choices:
            raise self.fail(f"{where}{key}", f"{value!r} is not one of {', '.join(choices)}",
                            f"choose one of: {', '.join(choices)}")
        return value

    def existing_path(self, key: str, text: str, directory: bool) -> Path:
        path = (self.path.parent / Path(text).expanduser()).resolve()
        if not path.exists():
            raise self.fail(key, f"{path} does not exist",
                            "fix the path (relative paths start at the dataset file's folder)")
        if path.is_dir() != directory:
            raise self.fail(key, f"{path} is {'a file' if directory else 'a directory'}",
                            f"give the {'folder of the data files' if directory else 'schema file'}")
        if not directory and not path.is_file():  # a device or a pipe: /dev/zero never ends
            raise self.fail(key, f"{path} is not a regular file", "give the schema file")
        return path

    def check_schema(self, path: Path, label: str, feature_list: list[Feature]) -> None:
        try:
            curated.check_schema(path, label, feature_list)
        except curated.SchemaProblem as problem:
            raise self.fail(problem.key, problem.problem, problem.fix) from None

    def dataset(self) -> Dataset:
        raw = self.raw
        self.unknown_keys(raw, _TOP_KEYS, "")
        name = self.get(raw, "name", str)
        if not NAME_RE.match(name):
            raise self.fail("name", f"{name!r} is not a valid name",
                            "use a letter followed by letters, digits, '-' or '_' (at most 63 characters)")
        task = self.get(raw, "task", str, choices=TASKS)
        label = self.get(raw, "label", str)
        generate = self.get(raw, "generate", str, default=None, choices=GENERATORS)
        data_root = raw.get("data_root")
        if data_root is None and generate is None:
            raise self.fail("data_root", "missing", "add data_root = \"DIR\" (the folder of your CSV or Parquet files)")
        data_root = (self.existing_path("data_root", self.get(raw, "data_root", str), directory=True)
                     if data_root is not None else None)
        rows = self.get(raw, "rows", int, default=None)
        if rows is not None and generate != "synthetic":
            raise self.fail("rows", "only a generated synthetic dataset has a row count", "remove it")
        features_table = self.get(raw, "features", dict)
        feature_list = [self.feature(column, value) for column, value in features_table.items()]
        if label in features_table:
            raise self.fail(f"features.{label}", "the label is not a feature", "remove it from [features]")
        if not any(f.role != "ignore" for f in feature_list):
            raise self.fail("features", "no numeric, categorical, date or text feature",
                            "give at least one column the role \"numeric\", \"categorical\", \"date\" or \"text\"")
        self.distinct_identifiers([label, *(f.name for f in feature_list)])
        classes = self.get(raw, "classes", int, default=None)
        if task == MULTICLASS and (classes is None or classes < 3):
            raise self.fail("classes", "a multiclass task needs the number of label values (3 or more)",
                            "set classes = N, or task = \"binary\" for two")
        positive = self.get(raw, "positive", str, default=None)
        if positive is not None and task != BINARY:
            raise self.fail("positive", "only a binary task has a positive class", "remove it")
        slices = tuple(self.get(raw, "slices", list, default=[]))
        for column in slices:
            if not isinstance(column, str) or column not in features_table:
                raise self.fail("slices", f"{column!r} is not a column under [features]",
                                "slice by feature columns only")
        schema = self.existing_path("schema", self.get(raw, "schema", str), directory=False)
        dataset = Dataset(
            name=name,
            path=self.path,
            data_root=data_root,
            format=self.get(raw, "format", str, default="csv", choices=FORMATS),
            label=label,
            task=task,
            classes=classes if task == MULTICLASS else None,
            positive=positive,
            schema=schema,
            slices=slices,
            features=tuple(feature_list),
            blessing=self.blessing(task),
            training=self.training(),
            generate=generate,
            rows=rows,
            tuning=self.tuning(),
        )
        self.check_schema(schema, label, feature_list)  # last: the file's own keys are named first
        return dataset

    def feature(self, column: str, value: Any) -> Feature:
        where = f"features.{column}"
        if isinstance(value, str):
            value = {"role": value}
        if not isinstance(value, dict):
            raise self.fail(where, f"{value!r} is not a role", f"write \"{column}\" = \"numeric\", "
                            "\"categorical\", \"date\", \"text\" or \"ignore\", or an inline table {role = ...}")
        self.unknown_keys(value, _FEATURE_KEYS, f"{where}.")
        role = self.get(value, "role", str, f"{where}.", choices=ROLES)
        settings = {key: self.get(value, key, int, f"{where}.", default=None)
                    for key in ("max_tokens", "frequency_threshold", "embedding_dim")}
        missing_values = self.get(value, "missing_values", list, f"{where}.", default=[])
        if missing_values and role != "numeric":
            raise self.fail(f"{where}.missing_values", "applies to numeric features only", "remove it")
        if not all(isinstance(v, str) and v.strip() for v in missing_values):
            raise self.fail(f"{where}.missing_values", f"{missing_values!r} is not a list of texts",
                            "list the text values that stand for no number, e.g. [\"T\", \"n/a\"]")
        number_format = self.get(value, "number_format", str, f"{where}.", default=None,
                                 choices=tuple(NUMBER_FORMATS))
        if number_format is not None and role != "numeric":
            raise self.fail(f"{where}.number_format", "applies to numeric features only", "remove it")
        for key, setting in settings.items():
            if setting is not None and role != "categorical":
                raise self.fail(f"{where}.{key}", "applies to categorical features only", "remove it")
            if setting is not None and setting < 1:
                raise self.fail(f"{where}.{key}", f"{setting} is not positive", "use a whole number of 1 or more")
        return Feature(column, role, **settings, missing_values=tuple(v.strip() for v in missing_values),
                       number_format=number_format)

    def distinct_identifiers(self, columns: list[str]) -> None:
        reserved = reserved_name(columns)
        if reserved is not None:
            raise self.fail(f"features.{reserved}", f"becomes the TF name {EXAMPLES_INPUT!r}", RESERVED_FIX)
        clash = identifier_clash(columns)
        if clash is not None:
            first, column, name = clash
            raise self.fail(f"features.{column}", f"maps to the same TF name {name!r} as {first!r}",
                            "rename one of the two columns in the data")

    def blessing(self, task: str) -> Blessing:
        table = self.get(self.raw, "blessing", dict, default={})
        self.unknown_keys(table, {"metric", "threshold", "max_drop"}, "blessing.")
        defaults = DEFAULT_BLESSING[task]
        metric = self.get(table, "metric", str, "blessing.", default=defaults["metric"], choices=TASK_METRICS[task])
        metric_default = DEFAULT_BLESSING[task] if metric == defaults["metric"] else {"threshold": None}
        threshold = self.get(table, "threshold", (int, float), "blessing.", default=metric_default["threshold"])
        max_drop = self.get(table, "max_drop", (int, float), "blessing.", default=defaults["max_drop"])
        for key, value in (("threshold", threshold), ("max_drop", max_drop)):
            if value is not None and not math.isfinite(value):  # TOML writes nan and inf
                raise self.fail(f"blessing.{key}", f"{value} is not a finite number", "give a number")
        if HIGHER_IS_BETTER[metric] and threshold is not None and not 0 <= threshold <= 1:
            raise self.fail("blessing.threshold", f"{threshold} is outside [0, 1]", f"give {metric} as a fraction")
        if threshold is None and max_drop is None:
            raise self.fail("blessing.threshold", f"no bound on {metric} to bless against",
                            "set threshold (the largest error a model may have), e.g. the label's standard deviation")
        if max_drop is not None and max_drop < 0:
            raise self.fail("blessing.max_drop", f"{max_drop} is negative", "use 0 or more")
        return Blessing(metric, None if threshold is None else float(threshold),
                        None if max_drop is None else float(max_drop))

    def training(self) -> TrainingConfig:
        """Every TrainingConfig knob may be set here; its range is checked with the flags
        (PipelineConfig), which may override it."""
        knobs = dataclasses.fields(training_config.TrainingConfig)
        table = self.get(self.raw, "training", dict, default={})
        self.unknown_keys(table, {knob.name for knob in knobs}, "training.")
        given = {}
        for knob in (knob for knob in knobs if knob.name in table):
            value = self.get(table, knob.name, training_config.value_kind(knob), "training.",
                             choices=knob.metadata.get("choices") or None)
            if isinstance(value, list) and not all(isinstance(u, int) and not isinstance(u, bool) for u in value):
                raise self.fail(f"training.{knob.name}", f"{value!r} is not a list of whole numbers",
                                f"write e.g. {knob.name} = {list(cast(tuple, knob.default))}")
            given[knob.name] = training_config.coerce(knob, value)
        return training_config.TrainingConfig(**given | self.model(given))

    def tuning(self) -> TuningConfig:
        table = self.get(self.raw, "tuning", dict, default={})
        self.unknown_keys(table, set(TUNING_KEYS), "tuning.")
        given = {key: self.get(table, key, kind, "tuning.") for key, kind in TUNING_KEYS.items() if key in table}
        if not all(isinstance(knob, str) for knob in given.get("knobs", [])):
            raise self.fail("tuning.knobs", f"{given['knobs']!r} is not a list of knob names",
                            'write knobs = ["learning_rate", "dropout"]')
        return TuningConfig(**given)

    def model(self, training: dict[str, Any]) -> dict[str, Any]:
        """[model]'s knobs by TrainingConfig field; one set in [training] too is refused."""
        table = self.get(self.raw, "model", dict, default={})
        self.unknown_keys(table, set(MODEL_KEYS), "model.")
        given = {}
        for key, name in MODEL_KEYS.items():
            if key not in table:
                continue
            if name in training:
                raise self.fail(f"model.{key}", f"set in [training] too (as {name})", "set it in one place")
            knob = next(field for field in dataclasses.fields(TrainingConfig) if field.name == name)
            value = self.get(table, key, training_config.value_kind(knob), "model.",
                             choices=knob.metadata.get("choices") or None)
            given[name] = training_config.coerce(knob, value)
        return given
