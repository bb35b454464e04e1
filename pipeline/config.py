"""PipelineConfig: every knob of a turbotfx run, with defaults and validation."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from components.atomic_pusher.keys import DEFAULT_KEEP_VERSIONS
from pipeline import datasets
from pipeline.datasets import Dataset
from pipeline.errors import ConfigError
from pipeline.store.url import parse_url, sqlite_url
from trainer_module import hardware, optimizer_choice

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
# Knobs whose default comes from the dataset file ([training]); a None field takes it.
TRAINING_FIELDS = ("epochs", "batch_size", "learning_rate", "hidden_units")


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    pipeline_name: str = "turbotfx"
    home: str = DEFAULT_HOME
    dataset: str = "penguins"  # a built-in dataset's name or a dataset file's path
    data_root: str | None = None  # None: the dataset file's, or a built-in written into the workspace
    rows: int | None = None  # size of the synthetic dataset
    # None below: the dataset file's value (its name, [training], [blessing]).
    model_name: str | None = None
    train_buckets: int = 4  # hash split train:eval
    eval_buckets: int = 1
    epochs: int | None = None
    batch_size: int | None = None  # per replica
    learning_rate: float | None = None
    hidden_units: tuple[int, ...] | None = None
    blessing_threshold: float | None = None  # bound on the blessing metric (lower, or upper for errors)
    max_metric_drop: float | None = None  # how much worse than the baseline a model may be
    keep_versions: int = DEFAULT_KEEP_VERSIONS  # pushed versions kept on disk (labelled ones always are)
    beam_mode: str = "auto"
    # MLMD store URL (see pipeline/store/url.py); None: SQLite in the workspace.
    metadata_url: str | None = None
    enable_cache: bool = True
    # Trainer hardware: each "auto" is resolved from the devices the Trainer sees.
    strategy: str = "auto"
    precision: str = "auto"
    xla: str = "auto"
    optimizer: str = "auto"  # "auto": a sparse-aware one when the model has embeddings
    steps_per_execution: int = 32  # chosen by benchmarks/trainer_bench.py (see README, Speed)
    accumulation_steps: int = 1  # micro-batches per optimizer step
    scale_learning_rate: bool = False  # linear scaling: learning rate x replicas
    tensorboard_histogram_freq: int = 5  # epochs between weight histograms; 0: none
    profile_batches: str = ""  # e.g. "2,4" profiles batches 2 to 4; "": no profiling

    # The loaded dataset file (set from `dataset`).
    spec: Dataset = dataclasses.field(init=False, compare=False, repr=False)

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
            **{field: spec.training[field] for field in TRAINING_FIELDS},
        }
        for field, value in defaults.items():
            if getattr(self, field) is None:
                object.__setattr__(self, field, value)
        object.__setattr__(self, "hidden_units", tuple(self.hidden_units))
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
        for field, allowed in (
            ("strategy", hardware.STRATEGIES),
            ("precision", hardware.PRECISIONS),
            ("xla", hardware.XLA_MODES),
            ("optimizer", optimizer_choice.OPTIMIZERS),
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
        _require(_profile_range_ok(self.profile_batches),
                 f"profile batches {self.profile_batches!r} must be START,END with 1 <= START <= END "
                 "(Keras counts training batches from 1), e.g. 2,4; or empty for no profiling")
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


def _profile_range_ok(text: str) -> bool:
    """What the Trainer's Keras TensorBoard callback profiles: batches START to END, counted
    from 1 (it refuses END < START; START 0 would never match a batch)."""
    if text == "":
        return True
    match = re.fullmatch(r"(\d+),(\d+)", text)
    return match is not None and 1 <= int(match[1]) <= int(match[2])


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
