"""`turbotfx serving promote | rollback | status`: the labels TF Serving routes by, changed
or read by pipeline/serving_labels.py and rendered here as text or JSON; and `turbotfx
predict`: rows in (JSON or CSV), label and probabilities out, from the newest pushed model
in-process or from a TF Serving server over gRPC or REST."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.cli import args as cli_args
from pipeline.cli import console
from pipeline.errors import ConfigError

if TYPE_CHECKING:  # serving/ loads with the commands that use it, not at start-up
    from pipeline.serving_labels import ServingStatus


def add_parser(commands: argparse._SubParsersAction) -> None:
    serving = commands.add_parser("serving", help="serving labels: promote the canary, roll it back, status")
    actions = serving.add_subparsers(dest="serving_command", required=True, metavar="SUBCOMMAND")
    for name, text in (("promote", "label a version stable (default: the canary)"),
                       ("rollback", "send the canary label back to the stable version"),
                       ("status", "versions on disk, labels, and the run each came from (MLMD)")):
        action = actions.add_parser(name, help=text)
        cli_args.add_home(action)
        cli_args.add_dataset(action, "whose model: a dataset file or a built-in (default: the workspace's only "
                                     "model; status: every model)")
        cli_args.add_model_name(action, "model directory under the serving root (default: the dataset's)")
        if name == "promote":
            action.add_argument("version", nargs="?", type=int, help="version to label stable (default: the canary)")
        cli_args.add_metadata_url(action, "MLMD store whose push records the serving directory is checked "
                                          "against (default: the workspace's SQLite store)")
        if name == "status":
            cli_args.add_format(action)
    serving.set_defaults(handler=handle_serving)

    predict = commands.add_parser("predict", help="predict rows with the latest pushed model or a TF Serving server")
    rows = predict.add_mutually_exclusive_group(required=True)
    rows.add_argument("--json", help='one row or a list of rows: \'{"island": "Biscoe", "bill_length_mm": 46.5}\'; '
                                     "@FILE reads them from a file, - from standard input")
    rows.add_argument("--csv", help="CSV file with a header of feature names (empty cell: missing)")
    server = predict.add_mutually_exclusive_group()
    server.add_argument("--grpc", help="TF Serving gRPC target HOST:PORT (default: in-process, no server)")
    server.add_argument("--rest", help="TF Serving REST URL, e.g. http://localhost:8501")
    which = predict.add_mutually_exclusive_group()
    which.add_argument("--label", help="server version label, e.g. stable or canary")
    which.add_argument("--version", type=int, help="server model version")
    cli_args.add_home(predict)
    cli_args.add_dataset(predict, "whose columns the rows have: a dataset file or a built-in (default: the "
                                  "dataset of the workspace's only model)")
    cli_args.add_model_name(predict, "model name (default: the dataset's)")
    predict.add_argument("--timeout", type=float, default=10.0, help="seconds per server request (default: 10)")
    cli_args.add_format(predict)
    predict.set_defaults(handler=handle_predict)


# --- serving ---------------------------------------------------------------------------

def handle_serving(args: argparse.Namespace) -> int:
    """Each chosen model's labels changed or read (pipeline/serving_labels.py), rendered: what
    was put right and the warnings on stderr as they come, the labels on stdout."""
    from pipeline import serving_labels

    home = cli_args.workspace_config(args).home_path
    if not home.is_dir():
        raise ConfigError(f"no workspace at {home}: run the pipeline there first (`turbotfx run --home {home}`), "
                          "or name the workspace with --home or $TURBOTFX_HOME")
    configs = chosen_models(args, every_model=args.serving_command == "status")
    # MLMD's C++ connection logs kept off the terminal, as cli_args.open_query_store keeps them
    # (read when MLMD loads, inside the calls below): what went wrong is ours to print.
    os.environ.setdefault("GLOG_minloglevel", "3")
    url = args.metadata_url
    if args.serving_command == "promote":
        statuses = [serving_labels.promote(config, args.version, _to_stderr, metadata_url=url) for config in configs]
    elif args.serving_command == "rollback":
        statuses = [serving_labels.rollback(config, _to_stderr, metadata_url=url) for config in configs]
    else:
        statuses = [serving_labels.status(config, _to_stderr, metadata_url=url) for config in configs]
    if getattr(args, "format", "text") == "json":
        # One model named (or the only one): its status, as before; several: each of them.
        documents = [status.as_json() for status in statuses]
        print(json.dumps(documents[0] if len(documents) == 1 else {"models": documents}, indent=2))
    else:
        print("\n".join(_text(status) for status in statuses))
    return 0


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


def chosen_models(args: argparse.Namespace, every_model: bool = False, needs_dataset: bool = False) -> list:
    """The model --dataset or --model-name names; else the workspace's only served model;
    every one of several when every_model, else a ConfigError asking which. A workspace
    serving nothing gets the default dataset's. needs_dataset (rows to predict): the config
    carries the dataset file the model's newest push was trained from."""
    from pipeline import workspace
    from pipeline.config import PipelineConfig
    from serving import model_config

    named = cli_args.workspace_config(args)
    if getattr(args, "dataset", None):
        return [named]
    models = [args.model_name] if args.model_name else model_config.served_models(named.serving_dir.parent)
    if not models:
        return [named]
    if len(models) > 1 and not every_model:
        raise ConfigError(f"this workspace serves {len(models)} models ({', '.join(models)}); say which with "
                          "--model-name NAME or --dataset FILE")
    chosen = []
    for name in models:
        dataset, skipped = workspace.dataset_of_model(named, name) if needs_dataset else (None, [])
        for problem in skipped:
            cli_args.warn_skipped_store(problem)
        # A model with no recorded push of a dataset file is taken to be the default dataset's
        # (named.spec: no --dataset was given).
        if needs_dataset and dataset is None and name != named.spec.name:
            raise ConfigError(f"no push of model {name!r} in this workspace records its dataset file; "
                              "give it with --dataset FILE")
        # Built again only where it differs from the config the flags named.
        same = dataset is None and name == named.model_name
        overrides: dict[str, Any] = {"dataset": dataset} if dataset else {}
        chosen.append(named if same else PipelineConfig(home=named.home, model_name=name,
                                                        **overrides))
    return chosen


def _text(status: ServingStatus) -> str:
    lines = [f"{status.model}: stable {status.stable}, canary {status.canary}  ({status.config_path})"]
    for entry in status.versions:
        origin = f"model {entry.model_id}, run {entry.run_id}" if entry.model_id is not None else ""
        lines.append(f"  {entry.version:<12} {','.join(status.labels_of(entry.version)):<14} {origin}")
    return "\n".join(lines)


# --- predict ---------------------------------------------------------------------------

def handle_predict(args: argparse.Namespace) -> int:
    [config] = chosen_models(args, needs_dataset=True)
    # TF's import and SavedModel loading log to the terminal: they go to the log file, or
    # nowhere where the workspace cannot be written (predict only reads it).
    log_path = config.log_path if console.can_log(config.log_path) else None
    with console.session(log_path, verbose=False) as out:
        predictions, source = _predict(args, config)
        if args.format == "json":
            out.line(json.dumps({"model": source, "predictions": [_as_dict(p) for p in predictions]}, indent=2))
            return 0
        out.line(f"model: {source}")
        for number, prediction in enumerate(predictions):
            if prediction.value is not None:
                out.line(f"row {number}: {prediction.value:.6g}")
                continue
            out.line(f"row {number}: {prediction.label}  (p={prediction.probabilities[prediction.class_id]:.3f}; "
                     f"{_probabilities_text(prediction)})")
    return 0


def _probabilities_text(prediction) -> str:
    """'Adelie 0.012, Chinstrap 0.007, Gentoo 0.981': every class by name, in name order (the
    class ids follow label frequencies, which differ between models); a model exported
    before it named its classes gives the bare list."""
    by_class = prediction.by_class()
    if by_class is None:
        return f"probabilities [{', '.join(f'{p:.3f}' for p in prediction.probabilities)}]"
    return ", ".join(f"{name} {by_class[name]:.3f}" for name in sorted(by_class))


def _predict(args: argparse.Namespace, config) -> tuple[list, str]:
    from pipeline.scoring import inputs
    from serving import push
    from serving.client import ServingClient, predict_in_process

    schema = inputs.row_schema(config.spec)
    rows = schema.without_label(_rows(args, schema))
    if args.grpc or args.rest:
        client = ServingClient(schema=schema, grpc_target=args.grpc, rest_url=args.rest,
                               model_name=config.model_name, version=args.version, label=args.label,
                               timeout_s=args.timeout)
        return client.predict(rows), args.grpc or args.rest
    if args.label or args.version:
        raise ConfigError("--label and --version pick a version on a server: add --grpc or --rest")
    versions = push.versions(config.serving_dir)
    if not versions:
        raise ConfigError(f"no pushed model under {config.serving_dir}: run the pipeline first (`turbotfx run`)")
    from serving import model_config

    # The canary (the newest push unless rolled back) is what models.config serves; a
    # newer directory it does not name is a push that never completed.
    canary = model_config.status(config.serving_dir.parent, config.serving_dir.name).canary
    model_dir = config.serving_dir / str(canary if canary in versions else versions[-1])
    return predict_in_process(model_dir, schema, rows), str(model_dir)


def _json_text(given: str) -> str:
    """--json's rows: the text itself, @FILE's contents, or standard input's for '-' (a
    request too large for a command line)."""
    if given == "-":
        return sys.stdin.read()
    if not given.startswith("@"):
        return given
    path = Path(given[1:]).expanduser()
    if not path.is_file():
        raise ConfigError(f"--json {given}: no such file; name a file of JSON rows after the @")
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise ConfigError(f"--json {given}: the file is not UTF-8 text; save it as UTF-8 JSON") from None


def _as_dict(prediction) -> dict[str, Any]:
    """A classifier's label, class id, probabilities (in class id order) and
    `class_probabilities` ({label value: probability}), or a regression model's value."""
    fields = {key: value for key, value in prediction.__dict__.items() if value is not None and key != "classes"}
    by_class = prediction.by_class()
    return fields if by_class is None else {**fields, "class_probabilities": by_class}


def _rows(args: argparse.Namespace, schema) -> list[Any]:
    if args.json is not None:
        try:
            parsed = json.loads(_json_text(args.json))
        except ValueError as err:
            raise ConfigError(f"--json is not valid JSON ({err}); give an object or a list of objects") from None
        except RecursionError:
            raise ConfigError("--json nests deeper than a row ever does; give an object of feature values or a "
                              "list of such objects") from None
        return parsed if isinstance(parsed, list) else [parsed]
    path = Path(args.csv)
    if not path.is_file():
        raise ConfigError(f"--csv {path}: no such file")
    return schema.rows_from_csv(path)
