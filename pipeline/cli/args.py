"""Flags that more than one command takes, declared once, and what they name: the
pipeline's config, the workspace, the metadata store.

A flag's help may differ between commands (what --home is *for* differs); its name,
type and meaning do not.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, Sequence

from pipeline import config as config_lib
from pipeline.config import PipelineConfig
from pipeline.errors import ConfigError
from pipeline.store.url import existing_store_url, sqlite_url
from trainer_module import config as training_config
from trainer_module import search_space

if TYPE_CHECKING:
    from ml_metadata.metadata_store import metadata_store

# The exit code of input turbotfx refuses (a flag, a file, the data): argparse's own for usage.
BAD_INPUT_EXIT = 2

# PipelineConfig field set by each flag (by its argparse dest) that maps one to one. The
# training knobs' flags are TrainingConfig's (training_flags).
FIELD_OF_FLAG = {
    "home": "home",
    "dataset": "dataset",
    "data_root": "data_root",
    "rows": "rows",
    "pipeline_name": "pipeline_name",
    "model_name": "model_name",
    "blessing_threshold": "blessing_threshold",
    "max_metric_drop": "max_metric_drop",
    "keep_versions": "keep_versions",
    "beam_mode": "beam_mode",
    "metadata_url": "metadata_url",
}


# Help texts quote the defaults from where they are set.
_FIELD_DEFAULTS = {field.name: field.default for field in dataclasses.fields(PipelineConfig)}


def _per_dataset(knob: str) -> str:
    """'20 penguins, 3 synthetic': a training knob's default in each built-in dataset file."""
    from pipeline import datasets

    return ", ".join(f"{getattr(datasets.load(name).training, knob)} {name}" for name in datasets.builtin_names())


def training_flags() -> list[dataclasses.Field]:
    """The TrainingConfig fields that have a flag, whose argparse dest is the field's name."""
    return [field for field in dataclasses.fields(training_config.TrainingConfig) if field.metadata["has_flag"]]


def _add_training_flag(parser: argparse.ArgumentParser, field: dataclasses.Field) -> None:
    """A knob's flag from its TrainingConfig field: --field-name unless it names another,
    its help quoting the default (each built-in's, for a dataset knob)."""
    meta = field.metadata
    flag = meta["flag"] or "--" + field.name.replace("_", "-")
    default = _per_dataset(field.name) if meta["per_dataset"] else field.default
    options: dict[str, Any] = {"dest": field.name, "help": meta["help"].format(default=default)}
    if isinstance(field.default, bool):
        # --knob / --no-knob, None when absent: the dataset file's value stands.
        options.update(action=argparse.BooleanOptionalAction, default=None)
    elif meta["choices"]:
        options["choices"] = meta["choices"]
    else:
        options.update(type=type(field.default), metavar=flag[2:].replace("-", "_").upper())
    parser.add_argument(flag, **options)


# --- single flags ----------------------------------------------------------------------

def add_home(parser: argparse.ArgumentParser, what: str = "workspace") -> None:
    parser.add_argument("--home", help=f"{what} (default: ${config_lib.HOME_ENV_VAR} or ./workspace)")


def add_metadata_url(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--metadata-url", help=help)


def add_dataset(parser: argparse.ArgumentParser, help: str, **options) -> None:
    parser.add_argument("--dataset", help=help, **options)


def add_model_name(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--model-name", help=help)


def add_data_root(parser: argparse.ArgumentParser, help: str, **options) -> None:
    parser.add_argument("--data-root", help=help, **options)


def add_table_format(parser: argparse.ArgumentParser) -> None:
    """--format of a table's files (`init`, `schema infer`); not the output --format."""
    from pipeline.datasets import FORMATS

    parser.add_argument("--format", choices=FORMATS, help="the files' format (default: from their suffix)")


def add_quiet_logging(parser: argparse.ArgumentParser) -> None:
    """Commands that load TF and Beam: their logs go to the workspace's log file."""
    add_home(parser, "workspace whose log takes the TF and Beam logs")
    add_verbose(parser, "show TF and Beam logs")


def add_beam_mode(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--beam-mode", choices=config_lib.BEAM_MODES,
                        help="Beam DirectRunner mode (default: auto, by data size)")


def add_no_cache(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--no-cache", action="store_true", help=help)


def add_verbose(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("-v", "--verbose", action="store_true", help=help)


def add_format(parser: argparse.ArgumentParser, choices: Sequence[str] = ("text", "json"),
               help: str | None = None) -> None:
    parser.add_argument("--format", choices=tuple(choices), default=choices[0],
                        help=help or f"how to print the answer (default: {choices[0]})")


# --- groups of flags -------------------------------------------------------------------

def add_workspace_args(parser: argparse.ArgumentParser) -> None:
    """Where a run lives and what it reads: `run`."""
    add_home(parser, "workspace directory")
    add_dataset(parser, "a dataset file (write one with `turbotfx init`) or a built-in: "
                        f"{', '.join(_builtin_datasets())} (default: {_FIELD_DEFAULTS['dataset']})")
    add_data_root(parser, "directory of other CSV or Parquet files with the dataset file's columns "
                          "(default: the dataset file's data_root)")


def add_served_model_args(parser: argparse.ArgumentParser, verbose_help: str) -> None:
    """Which served model a batch command uses, and how it reports: `score`, `drift`."""
    add_home(parser)
    add_dataset(parser, "whose model: a dataset file or a built-in (default: the workspace's only model)")
    add_model_name(parser, "model name (default: the dataset's)")
    add_verbose(parser, verbose_help)
    add_format(parser)


def add_store_args(parser: argparse.ArgumentParser) -> None:
    """Which metadata store a question is asked of: `lineage`, `runs`, `diff`."""
    add_home(parser, "workspace whose SQLite store to read")
    add_metadata_url(parser, "MLMD store URL instead (sqlite://, mysql://, postgresql://; "
                             "password in $TURBOTFX_METADATA_PASSWORD)")


def add_pipeline_args(parser: argparse.ArgumentParser) -> None:
    """What the pipeline trains and how: `run` and `compile`."""
    defaults = _FIELD_DEFAULTS
    parser.add_argument("--pipeline-name", help=f"pipeline name in MLMD (default: {defaults['pipeline_name']})")
    parser.add_argument("--rows", type=int, help="rows of the synthetic dataset (default: its dataset file's)")
    add_model_name(parser, "name of the model under the serving dir (default: the dataset's)")
    parser.add_argument("--split", type=_split, help="train:eval hash buckets "
                                                     f"(default: {defaults['train_buckets']}:{defaults['eval_buckets']})")
    # The dataset knobs first, then the blessing, then how the Trainer runs.
    knobs = training_flags()
    for field in knobs:
        if field.metadata["per_dataset"]:
            _add_training_flag(parser, field)
    # --min-accuracy / --max-accuracy-drop: the names from before dataset files, kept working.
    parser.add_argument(config_lib.BLESSING_THRESHOLD_FLAG, "--min-accuracy", type=float, dest="blessing_threshold",
                        help="bound on the dataset file's blessing metric: the least accuracy or AUC, "
                             "the largest RMSE or MAE (default: the file's [blessing] threshold)")
    parser.add_argument(config_lib.MAX_METRIC_DROP_FLAG, "--max-accuracy-drop", type=float, dest="max_metric_drop",
                        help="how much worse than the last blessed model a model may be on that metric "
                             "(default: the file's [blessing] max_drop)")
    parser.add_argument("--keep-versions", type=int,
                        help="pushed versions kept under the serving dir; stable/canary always are "
                             f"(default: {defaults['keep_versions']})")
    for field in knobs:
        if not field.metadata["per_dataset"]:
            _add_training_flag(parser, field)
    add_tuning_args(parser.add_argument_group("tuning (a Tuner between Transform and the Trainer)"))


# TuningConfig field set by each --tune-* flag (by its argparse dest).
TUNING_FIELD_OF_FLAG = {"tune_trials": "trials", "tune_time": "minutes", "tune_knobs": "knobs",
                        "tune_storage": "storage", "tune_study": "study", "tune_parallelism": "parallelism"}


def add_tuning_args(group) -> None:
    group.add_argument("--tune-trials", type=int_at_least(0, search_space.MAX_TRIALS), metavar="N",
                       help="search the training knobs in N trials and train with the best; 0: train with the "
                            "knobs as given (default: the dataset file's [tuning] trials, else reuse the latest "
                            "tuning result of this dataset whose search space still matches)")
    group.add_argument("--tune-time", type=_positive_float, metavar="MINUTES",
                       help="tune for at most this long (with --tune-trials: whichever ends first)")
    group.add_argument("--tune-knobs", type=lambda text: tuple(k.strip() for k in text.split(",") if k.strip()),
                       metavar="KNOB,...", help="search only these knobs (default: every searched knob of the "
                                                "model family)")
    group.add_argument("--tune-storage", metavar="URL",
                       help="keep the study in sqlite:///PATH, mysql://USER@HOST[:PORT]/DB or "
                            "postgresql://USER@HOST[:PORT]/DB (password in $TURBOTFX_METADATA_PASSWORD), so "
                            "processes or machines given the same --tune-study share its trials "
                            "(default: in memory)")
    group.add_argument("--tune-study", metavar="NAME", help="the study's name in --tune-storage (default: a new one)")
    group.add_argument("--tune-parallelism", type=int_at_least(1, search_space.MAX_PARALLELISM), metavar="P",
                       help=f"processes running trials at once, each with a model in memory (default: 1; at most "
                            f"{search_space.MAX_PARALLELISM})")


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


def _builtin_datasets() -> tuple[str, ...]:
    from pipeline import datasets

    return datasets.builtin_names()


def int_at_least(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer no smaller than minimum (and no larger than maximum)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum}, got {value}")
        return value

    return parse


def _split(text: str) -> tuple[int, int]:
    try:
        return config_lib.parse_split(text)
    except ConfigError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


# --- what the flags name ---------------------------------------------------------------

def add_beam_runner_args(group, runners: Sequence[str], runner_help: str) -> None:
    """Where the Beam components (ExampleGen, StatisticsGen, Transform, Evaluator) run: the
    flags `run` and `compile` share."""
    from pipeline.runners import beam_args

    group.add_argument("--beam-runner", default="direct", choices=runners, help=runner_help)
    group.add_argument("--spark-master", help="Spark: the cluster's master, spark://HOST:PORT (Beam starts "
                                              "its Spark job server from the jar `make cluster-deps` fetches)")
    group.add_argument("--spark-job-server-jar",
                       help=f"Spark: the job server jar (default: {beam_args.default_spark_job_server_jar()})")
    group.add_argument("--job-endpoint", help="Flink / Spark: a Beam job server already running, HOST:PORT")
    group.add_argument("--worker-pool", help="Flink / Spark: a Beam Python worker pool with turbotfx installed, "
                                             "HOST:PORT (python -m pipeline.runners.worker_pool, on loopback)")
    group.add_argument("--beam-arg", action="append", default=[], metavar="--NAME=VALUE",
                       help="extra Beam pipeline arg, repeatable (e.g. --beam-arg=--max_num_workers=20)")


def beam_options_from_args(args: argparse.Namespace, **cloud: str | None):
    """The BeamOptions the Beam flags name (`cloud`: compile's Dataflow and image settings)."""
    from pipeline.runners import beam_args

    return beam_args.BeamOptions(
        runner=args.beam_runner, spark_master=args.spark_master, spark_job_server_jar=args.spark_job_server_jar,
        job_endpoint=args.job_endpoint, worker_pool=args.worker_pool, extra=tuple(args.beam_arg),
        spark_driver_host=getattr(args, "spark_driver_host", None), **cloud)


def config_from_args(args: argparse.Namespace, ignore: tuple[str, ...] = ()) -> PipelineConfig:
    """The whole PipelineConfig from the flags a command has (`ignore`: flags that mean
    something else there); fields without a flag take the chosen dataset's defaults."""
    given: dict[str, Any] = {field: getattr(args, flag) for flag, field in FIELD_OF_FLAG.items()
                                if hasattr(args, flag) and flag not in ignore}
    knobs = {field.name: getattr(args, field.name) for field in training_flags() if hasattr(args, field.name)}
    given["knobs"] = {name: value for name, value in knobs.items() if value is not None}
    given["tuning_settings"] = {field: getattr(args, flag) for flag, field in TUNING_FIELD_OF_FLAG.items()
                                if getattr(args, flag, None) is not None}
    if getattr(args, "split", None):
        given["train_buckets"], given["eval_buckets"] = args.split
    if getattr(args, "no_cache", False):
        given["enable_cache"] = False
    given["home"] = given.get("home") or config_lib.default_home()
    # Built in one go: fields left unset take the chosen dataset's defaults.
    return PipelineConfig(**{field: value for field, value in given.items() if value is not None})


def workspace_config(args: argparse.Namespace) -> PipelineConfig:
    """The workspace named by --home, --dataset and --model-name where a command has them;
    everything else at its default (where the SQLite store, the serving dir, the log are)."""
    given: dict[str, Any] = {"home": getattr(args, "home", None) or config_lib.default_home(),
             "dataset": getattr(args, "dataset", None), "model_name": getattr(args, "model_name", None)}
    return PipelineConfig(**{key: value for key, value in given.items() if value is not None})


def query_store_url(args: argparse.Namespace, config: PipelineConfig | None = None) -> str | None:
    """The store --metadata-url names, else the workspace's SQLite store if a run made it
    (config's: another pipeline's; default: the workspace's default pipeline's)."""
    return existing_store_url(args.metadata_url, (config or workspace_config(args)).metadata_path)


def query_store_urls(args: argparse.Namespace) -> list[str]:
    """--metadata-url's store, else every SQLite store in the workspace: the default pipeline's
    holds every dataset's runs, and each --pipeline-name keeps its own (metadata/<name>.sqlite)."""
    if args.metadata_url:
        return [args.metadata_url]
    return [sqlite_url(path) for path in workspace_config(args).workspace_store_paths]


def warn_skipped_store(problem: str) -> None:
    """A command that reads every store of the workspace names one it could not read."""
    print(f"turbotfx: warning: skipped a store: {problem}", file=sys.stderr)


def store_from_args(args: argparse.Namespace, config: PipelineConfig | None = None) -> metadata_store.MetadataStore:
    """The store to ask, which must exist: a query never creates an empty store."""
    url = query_store_url(args, config)
    if url is None:
        path = (config or workspace_config(args)).metadata_path
        raise ConfigError(
            f"no metadata store at {path}: run the pipeline first (`turbotfx run`), or point to the "
            "workspace with --home or to another store with --metadata-url"
        )
    return open_query_store(url)


def open_query_store(url: str) -> metadata_store.MetadataStore:
    """Opens a store to read, with MLMD's C++ connection logs kept off the terminal. A
    missing SQLite file is an error, never a new empty store (a mistyped --metadata-url)."""
    # Read when MLMD's library loads, just below: the answer (and any error, with its
    # cause) is ours to print.
    os.environ.setdefault("GLOG_minloglevel", "3")
    from pipeline.store import connection

    return connection.open_store(url, create=False)
