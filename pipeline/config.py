"""PipelineConfig: every knob of a turbotfx run, with defaults and validation."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from components.atomic_pusher.keys import DEFAULT_KEEP_VERSIONS
from pipeline.errors import ConfigError
from pipeline.store.url import parse_url, sqlite_url
from trainer_module import hardware

DATASETS = ("penguins", "synthetic")
BEAM_MODES = ("auto", "in_memory", "multi_process")
DEFAULT_HOME = "workspace"
HOME_ENV_VAR = "TURBOTFX_HOME"
# Above this much input data the DirectRunner's process pool pays for its start-up.
MULTI_PROCESS_THRESHOLD_BYTES = 256 * 1024 * 1024

_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,62}$")


# Knobs whose sensible value depends on the dataset; a None field takes these.
DATASET_DEFAULTS: dict[str, dict[str, object]] = {
    "penguins": {
        "model_name": "penguins", "epochs": 20, "batch_size": 32, "learning_rate": 0.01,
        "hidden_units": (32, 16), "min_accuracy": 0.6,
    },
    "synthetic": {
        "model_name": "synthetic", "epochs": 3, "batch_size": 256, "learning_rate": 0.002,
        "hidden_units": (256, 128, 64), "min_accuracy": 0.7, "rows": 100_000,
    },
}


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    pipeline_name: str = "turbotfx"
    home: str = DEFAULT_HOME
    dataset: str = "penguins"
    data_root: str | None = None  # None: the dataset is written into the workspace
    rows: int | None = None  # size of the synthetic dataset
    # None below: the dataset's default (DATASET_DEFAULTS).
    model_name: str | None = None
    train_buckets: int = 4  # hash split train:eval
    eval_buckets: int = 1
    epochs: int | None = None
    batch_size: int | None = None  # per replica
    learning_rate: float | None = None
    hidden_units: tuple[int, ...] | None = None
    min_accuracy: float | None = None  # value threshold for blessing
    max_accuracy_drop: float = 0.02  # change threshold against the baseline
    keep_versions: int = DEFAULT_KEEP_VERSIONS  # pushed versions kept on disk (labelled ones always are)
    beam_mode: str = "auto"
    # MLMD store URL (see pipeline/store/url.py); None: SQLite in the workspace.
    metadata_url: str | None = None
    enable_cache: bool = True
    # Trainer hardware: each "auto" is resolved from the devices the Trainer sees.
    strategy: str = "auto"
    precision: str = "auto"
    xla: str = "auto"
    steps_per_execution: int = 32  # chosen by benchmarks/trainer_bench.py (see README, Speed)
    accumulation_steps: int = 1  # micro-batches per optimizer step
    scale_learning_rate: bool = False  # linear scaling: learning rate x replicas
    tensorboard_histogram_freq: int = 5  # epochs between weight histograms; 0: none
    profile_batches: str = ""  # e.g. "2,4" profiles batches 2 to 4; "": no profiling

    def __post_init__(self) -> None:
        if self.dataset not in DATASETS:
            raise ConfigError(
                f"unknown dataset {self.dataset!r}; choose one of: {', '.join(DATASETS)}"
            )
        if self.rows is not None and self.dataset != "synthetic":
            raise ConfigError(
                "--rows sizes the synthetic dataset only; drop it or add --dataset synthetic"
            )
        for field, value in DATASET_DEFAULTS[self.dataset].items():
            if getattr(self, field) is None:
                object.__setattr__(self, field, value)
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
    def metadata_store_url(self) -> str:
        """The store a run writes: --metadata-url, else the workspace's SQLite file."""
        return self.metadata_url or sqlite_url(self.metadata_path)

    @property
    def serving_dir(self) -> Path:
        return self.home_path / "serving" / self.model_name

    @property
    def log_path(self) -> Path:
        return self.home_path / "logs" / "turbotfx.log"

    @property
    def data_path(self) -> Path:
        if self.data_root:
            return Path(self.data_root).expanduser().resolve()
        if self.dataset == "synthetic":
            return self.home_path / "data" / self.dataset / f"rows-{self.rows}"
        return self.home_path / "data" / self.dataset

    def validate(self) -> None:
        _require(self.rows is None or self.rows >= 100,
                 f"rows must be at least 100 (both splits need data), got {self.rows}")
        for field in ("pipeline_name", "model_name"):
            value = getattr(self, field)
            if not _NAME_RE.match(value):
                raise ConfigError(
                    f"{field} {value!r} is not a valid name; use a letter followed by "
                    "letters, digits, '-' or '_' (at most 63 characters)"
                )
        if self.beam_mode not in BEAM_MODES:
            raise ConfigError(
                f"unknown beam mode {self.beam_mode!r}; choose one of: {', '.join(BEAM_MODES)}"
            )
        for field, allowed in (
            ("strategy", hardware.STRATEGIES),
            ("precision", hardware.PRECISIONS),
            ("xla", hardware.XLA_MODES),
        ):
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
        _require(self.profile_batches == "" or re.fullmatch(r"\d+,\d+", self.profile_batches) is not None,
                 f"profile batches {self.profile_batches!r} must be START,END (e.g. 2,4) or empty")
        if self.metadata_url:
            parse_url(self.metadata_url)
        _require(self.train_buckets >= 1 and self.eval_buckets >= 1,
                 "split buckets must be positive integers, e.g. --split 4:1")
        _require(self.epochs >= 1, f"epochs must be at least 1, got {self.epochs}")
        _require(self.batch_size >= 1, f"batch size must be at least 1, got {self.batch_size}")
        _require(0 < self.learning_rate < 10,
                 f"learning rate must be in (0, 10), got {self.learning_rate}")
        _require(len(self.hidden_units) >= 1 and all(u >= 1 for u in self.hidden_units),
                 f"hidden units must be positive integers, got {self.hidden_units}")
        _require(0.0 <= self.min_accuracy <= 1.0,
                 f"min accuracy must be in [0, 1], got {self.min_accuracy}")
        _require(self.keep_versions >= 1, f"keep versions must be at least 1, got {self.keep_versions}")
        _require(0.0 <= self.max_accuracy_drop <= 1.0,
                 f"max accuracy drop must be in [0, 1], got {self.max_accuracy_drop}")


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
