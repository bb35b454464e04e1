"""PipelineConfig: every knob of a turbotfx run, with defaults and validation."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Mapping

from components.atomic_pusher.keys import DEFAULT_KEEP_VERSIONS
from pipeline import datasets
from pipeline.datasets import Dataset
from pipeline.errors import ConfigError
from pipeline.store.url import parse_url, sqlite_url
from trainer_module.config import TrainingConfig
from trainer_module.search_space import TuningConfig

BEAM_MODES = ("auto", "in_memory", "multi_process")
DEFAULT_HOME = "workspace"
HOME_ENV_VAR = "TURBOTFX_HOME"
# Above this much input data the DirectRunner's process pool pays for its start-up. Set from
# benchmarks/scale_bench.py on a 2-core AMD EPYC (shared, noisy): preprocessing of the
# synthetic data took 75 s in memory vs 113 s multi-process at 100k rows (8.5 MB), 334 s vs
# 294 s at 1M rows (85 MB), with the machine under load; quieter, 44 s vs 92 s and 181 s vs
# 139 s. Both pairs of lines cross near 500-580k rows, 44-49 MB.
MULTI_PROCESS_THRESHOLD_BYTES = 48 * 1024 * 1024
# The flags that set the blessing bounds (the verdict names them when one fails).
BLESSING_THRESHOLD_FLAG, MAX_METRIC_DROP_FLAG = "--blessing-threshold", "--max-metric-drop"


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    pipeline_name: str = "turbotfx"
    home: str = DEFAULT_HOME
    dataset: str = "penguins"  # a built-in dataset's name or a dataset file's path
    data_root: str | None = None  # None: the dataset file's, or a built-in written into the workspace
    rows: int | None = None  # size of the synthetic dataset
    # None below: the dataset file's value (its name, [blessing]).
    model_name: str | None = None
    train_buckets: int = 4  # hash split train:eval
    eval_buckets: int = 1
    blessing_threshold: float | None = None  # bound on the blessing metric (lower, or upper for errors)
    max_metric_drop: float | None = None  # how much worse than the baseline a model may be
    keep_versions: int = DEFAULT_KEEP_VERSIONS  # pushed versions kept on disk (labelled ones always are)
    beam_mode: str = "auto"
    # MLMD store URL (see pipeline/store/url.py); None: SQLite in the workspace.
    metadata_url: str | None = None
    enable_cache: bool = True
    # Training knobs set here (flags, a caller), by TrainingConfig field name; every other
    # knob is the dataset file's [training] value, else TrainingConfig's default.
    knobs: Mapping[str, Any] = dataclasses.field(default_factory=dict, compare=False, repr=False)
    # Tuning settings set here (the --tune-* flags), by TuningConfig field name, over the dataset
    # file's [tuning].
    tuning_settings: Mapping[str, Any] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    # The loaded dataset file (set from `dataset`).
    spec: Dataset = dataclasses.field(init=False, compare=False, repr=False)
    # The Trainer's knobs: `knobs` over the dataset file's.
    training: TrainingConfig = dataclasses.field(init=False)
    # Whether the run tunes: `tuning_settings` over the dataset file's [tuning].
    tuning: TuningConfig = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        spec = datasets.load(self.dataset)
        object.__setattr__(self, "spec", spec)
        if self.rows is not None and spec.generate != "synthetic":
            raise ConfigError(
                "--rows sizes the synthetic dataset only; drop it or add --dataset synthetic"
            )
        defaults = {
            "model_name": spec.name, "rows": spec.rows,
            "blessing_threshold": spec.blessing.threshold, "max_metric_drop": spec.blessing.max_drop,
        }
        for field, value in defaults.items():
            if getattr(self, field) is None:
                object.__setattr__(self, field, value)
        unknown = sorted(set(self.knobs) - {field.name for field in dataclasses.fields(spec.training)})
        if unknown:
            raise ConfigError(f"unknown training knob {unknown[0]!r}")
        object.__setattr__(self, "training", dataclasses.replace(spec.training, **self.knobs))
        object.__setattr__(self, "tuning", dataclasses.replace(spec.tuning, **self.tuning_settings))
        self.validate()

    # Derived locations: everything a run writes lives under home.
    @property
    def home_path(self) -> Path:
        return Path(self.home).expanduser().resolve()

    @property
    def pipeline_root(self) -> Path:
        return self.home_path / "pipelines" / self.pipeline_name

    @property
    def metadata_path(self) -> Path:
        return self.home_path / "metadata" / f"{self.pipeline_name}.sqlite"

    @property
    def workspace_store_paths(self) -> list[Path]:
        """Every SQLite store of the workspace: the default pipeline's holds every dataset's
        runs, and each --pipeline-name keeps its own (metadata/<name>.sqlite)."""
        return sorted(self.metadata_path.parent.glob("*.sqlite"))

    @property
    def metadata_store_url(self) -> str:
        """The store a run writes: --metadata-url, else the workspace's SQLite file."""
        return self.metadata_url or sqlite_url(self.metadata_path)

    @property
    def serving_dir(self) -> Path:
        return self.home_path / "serving" / self.model_name

    @property
    def reports_dir(self) -> Path:
        """The run reports of this pipeline: reports/<pipeline>/<run>.html (pipeline/report)."""
        return self.home_path / "reports" / self.pipeline_name

    @property
    def log_path(self) -> Path:
        return self.home_path / "logs" / "turbotfx.log"

    @property
    def data_path(self) -> Path:
        if self.data_root:
            return Path(self.data_root).expanduser().resolve()
        if self.spec.data_root:
            return self.spec.data_root
        if self.rows is not None:
            return self.home_path / "data" / self.spec.name / f"rows-{self.rows}"
        return self.home_path / "data" / self.spec.name

    @property
    def higher_is_better(self) -> bool:
        return self.spec.blessing.higher_is_better

    def validate(self) -> None:
        _require(self.rows is None or self.rows >= 100,
                 f"rows must be at least 100 (both splits need data), got {self.rows}")
        for field in ("pipeline_name", "model_name"):
            value = getattr(self, field)
            if not datasets.NAME_RE.match(value):
                raise ConfigError(
                    f"{field} {value!r} is not a valid name; use a letter followed by "
                    "letters, digits, '-' or '_' (at most 63 characters)"
                )
        if self.beam_mode not in BEAM_MODES:
            raise ConfigError(
                f"unknown beam mode {self.beam_mode!r}; choose one of: {', '.join(BEAM_MODES)}"
            )
        try:
            self.training.validate()
            self.tuning.validate(self.training.model_family)
        except ValueError as err:
            raise ConfigError(str(err)) from None
        if self.tuning.storage:
            parse_url(self.tuning.storage)
        texts = [f.name for f in self.spec.features if f.role == "text"]
        if self.training.model_family == "gbt" and texts:
            raise ConfigError(f"the gbt family reads no text feature, and {texts[0]!r} is one "
                              f"({self.spec.path}); train with --model dnn, or set its role to \"ignore\"")
        if self.metadata_url:
            parse_url(self.metadata_url)
        _require(self.train_buckets >= 1 and self.eval_buckets >= 1,
                 "split buckets must be positive integers, e.g. --split 4:1")
        metric = self.spec.blessing.metric
        if self.higher_is_better and self.blessing_threshold is not None:
            _require(0.0 <= self.blessing_threshold <= 1.0,
                     f"blessing threshold on {metric} must be in [0, 1], got {self.blessing_threshold}")
        _require(self.blessing_threshold is not None or self.max_metric_drop is not None,
                 f"no bound on {metric} to bless against; give {BLESSING_THRESHOLD_FLAG} or set "
                 f"[blessing] threshold in {self.spec.path}")
        _require(self.keep_versions >= 1, f"keep versions must be at least 1, got {self.keep_versions}")
        if self.max_metric_drop is not None:
            _require(self.max_metric_drop >= 0 and (not self.higher_is_better or self.max_metric_drop <= 1),
                     f"max {metric} drop must be 0 or more (at most 1 for a fraction), got {self.max_metric_drop}")


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


def default_home() -> str:
    return os.environ.get(HOME_ENV_VAR) or DEFAULT_HOME


def parse_split(text: str) -> tuple[int, int]:
    """'4:1' -> (4, 1): hash buckets for train and eval."""
    parts = text.split(":")
    try:
        train, eval_ = (int(p) for p in parts)
    except ValueError:
        raise ConfigError(
            f"split {text!r} is not TRAIN:EVAL hash buckets; use e.g. --split 4:1"
        ) from None
    if train < 1 or eval_ < 1:
        raise ConfigError(f"split {text!r} needs positive buckets; use e.g. --split 4:1")
    return train, eval_


def ensure_writable_home(config: PipelineConfig) -> None:
    """Creates the workspace, failing with a clear message if it cannot be written."""
    home = config.home_path
    try:
        home.mkdir(parents=True, exist_ok=True)
        probe = home / ".write-probe"
        probe.write_text("ok")
        probe.unlink()
    except OSError as err:
        raise ConfigError(
            f"workspace {home} is not writable ({err.strerror}); choose another with "
            f"--home DIR or {HOME_ENV_VAR}=DIR"
        ) from None
