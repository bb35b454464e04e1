"""Lineage, run lists and diffs as text for people and DOT for Graphviz."""

from __future__ import annotations

import json
from typing import Any

from components.atomic_pusher import keys as pusher_keys
from serving.contract import latency_key
from trainer_module import config as training_config

# Hyperparameters shown first in the text tree (the model family, the knobs a dataset file
# sets); the rest follow in name order.
_HEADLINE = ("model_family", *training_config.dataset_knobs())
_TRAINING_SHOWN = ("gbt_trees", "train_steps", "examples_per_second", "fit_wall_s", "final_eval_accuracy", "final_eval_rmse",
                   "tf_version")


def lineage_text(lineage: dict[str, Any]) -> str:
    model, trainer = lineage["model"], lineage["trainer"]
    pushed = lineage["pushed_model"]
    name = (lineage.get("dataset") or {}).get("model_name") or (
        pusher_keys.model_name_of(pushed["destination"]) if pushed else None)
    lines = [_scoring_line(lineage["scoring"])] if lineage.get("scoring") else []
    lines.append(f"model {model['id']}{f' ({name})' if name else ''}  {model['uri']}")
    lines.append("├─ pushed: " + (f"version {pushed['version']} -> {pushed['destination']} (PushedModel {pushed['id']})"
                                  if pushed else "no"))
    pipeline = lineage["pipeline"]
    lines.append(f"├─ pipeline {pipeline['name']}, run {pipeline['run_id']}")
    evaluation = lineage["evaluation"]
    if evaluation:
        blessed = {True: "yes", False: "no", None: "unknown"}[evaluation["blessed"]]
        baseline = evaluation["baseline_model_id"]
        lines.append(f"├─ evaluation {evaluation['id']}: blessed {blessed}, baseline "
                     f"{'model ' + str(baseline) if baseline else 'none (first blessed model)'}")
        undefined = (evaluation.get("undefined_metrics") or {}).get("overall", {})
        shown = {**{name: _number(value) for name, value in evaluation["metrics"].items()},
                 **{name: f"n/a ({reason})" for name, reason in undefined.items()}}
        for name, value in sorted(shown.items()):
            lines.append(f"│    {name:<30} {value}")
    else:
        lines.append("├─ evaluation: none recorded")
    check = lineage.get("serving_check")
    if check:
        verdict = (f"passed, p50 {check[latency_key(50, 1)]:.2f} ms (batch 1), "
                   f"{check[latency_key(50, 64)]:.2f} ms (batch 64)"
                   if check["passed"] else f"FAILED: {check['problems']}")
        lines.append(f"├─ serving check {check['id']}: {verdict}")
    dataset = lineage.get("dataset") or {}
    if dataset.get("file"):
        lines.append(f"├─ dataset {dataset['name']} ({dataset['task']}, label {dataset['label']!r}) from "
                     f"{dataset['file']} (content {dataset['fingerprint']})")
    lines.append(f"└─ trainer execution {trainer['execution_id']} ({trainer['state']})")
    tuning = lineage.get("tuning")
    if tuning:
        source = f"reused from run {tuning['run_id']}" if tuning["reused"] else "tuned in this run"
        lines.append(f"   ├─ tuning {tuning['id']} ({source}): {tuning['trials']} trials ({tuning['pruned']} pruned, "
                     f"{tuning['failed']} failed), best trial {tuning['best_trial'] + 1}, {tuning['objective']} "
                     f"{_number(tuning['best_score'])}: "
                     + ", ".join(f"{k}={_short(v)}" for k, v in tuning["values"].items()))
    hyperparameters = trainer["hyperparameters"]
    ordered = [k for k in _HEADLINE if k in hyperparameters] + sorted(set(hyperparameters) - set(_HEADLINE))
    lines.append("   ├─ hyperparameters: " + ", ".join(f"{k}={_short(hyperparameters[k])}" for k in ordered))
    if trainer["effective"]:
        lines.append("   ├─ effective: " + ", ".join(f"{k}={_short(v)}" for k, v in trainer["effective"].items()))
    report = trainer["training_report"]
    training_shown = [k for k in _TRAINING_SHOWN if k in report]
    if training_shown:
        lines.append("   ├─ training: " + ", ".join(f"{k}={_short(report[k])}" for k in training_shown))
    lines.append(f"   ├─ code fingerprint {trainer['code_fingerprint']}")
    transform = lineage["transform"]
    if transform:
        lines.append(f"   ├─ transform execution {transform['execution_id']} ({transform['state']}) "
                     f"graph {transform['transform_graph_uri']}")
    schema = lineage["schema"]
    if schema:
        lines.append(f"   ├─ schema {schema['id']}  {schema['uri']}")
    examples = lineage["examples"]
    if examples:
        lines.append(f"   └─ examples {examples['id']}  span {examples['span']}, version {_or_dash(examples['version'])}, "
                     f"splits {','.join(examples['splits'])}  {examples['uri']}")
        lines.append(f"      │  fingerprint {examples['fingerprint']}")
        statistics, anomalies = lineage["statistics"], lineage["anomalies"]
        lines.append(f"      ├─ statistics {statistics['id']}  {statistics['uri']}" if statistics
                     else "      ├─ statistics: none recorded")
        if anomalies:
            lines.append(f"      └─ anomalies {anomalies['id']}: {'FOUND' if anomalies['found'] else 'none'}  "
                         f"{anomalies['uri']}")
        else:
            lines.append("      └─ anomalies: none recorded")
    return "\n".join(lines)


def study_text(study: dict[str, Any]) -> str:
    """A tuning result and its trials, one line each, in the order they started."""
    source = f"run {study['run_id']}" if study["run_id"] else "an unrecorded run"
    best = study["best_trial"]
    lines = [f"tuning {study['id']} ({source}, study {study['study']}): {study['trials']} trials "
             f"({study['pruned']} pruned, {study['failed']} failed) in {study['wall_s']:.1f}s; "
             f"best trial {best + 1}, {study['objective']} {_number(study['best_score'])}",
             f"{'trial':>5}  {'state':<8}  {'score':>10}  {'seconds':>8}  {'steps':>5}  values"]
    for trial in sorted(study["trial_list"], key=lambda t: t["number"]):
        marker = " *" if trial["number"] == best else ""
        seconds = "-" if trial["duration_s"] is None else f"{trial['duration_s']:.1f}"
        values = ", ".join(f"{k}={_short(v)}" for k, v in trial["values"].items())
        cause = f"  ({trial['error']})" if trial.get("error") else ""
        lines.append(f"{trial['number'] + 1:>5}  {trial['state']:<8}  {_or_dash(_number_or_none(trial['score'])):>10}  "
                     f"{seconds:>8}  {trial['steps']:>5}  {values}{marker}{cause}")
    lines.append("(* the best trial: the Trainer trains with its values)")
    return "\n".join(lines)


def _number_or_none(value: Any) -> str | None:
    return None if value is None else _number(value)


def lineage_dot(lineage: dict[str, Any]) -> str:
    """A Graphviz digraph: artifacts as ellipses, executions as boxes, edges named by key."""
    model_node = f"a{lineage['model']['id']}"
    lines = ["digraph lineage {", "  rankdir=LR;", '  node [fontname="Helvetica", fontsize=10];']
    for node in lineage["graph"]["nodes"]:
        number = node["id"][1:]
        if node["kind"] == "artifact":
            style = ', style=filled, fillcolor="#ffe08a"' if node["id"] == model_node else ""
            lines.append(f'  {node["id"]} [shape=ellipse, label={_dot_text(node["type"] + " " + number)}{style}];')
        else:
            label = f'{node["type"]} {number}\n{node["state"]}'
            lines.append(f'  {node["id"]} [shape=box, style=rounded, label={_dot_text(label)}];')
    for edge in lineage["graph"]["edges"]:
        lines.append(f'  {edge["from"]} -> {edge["to"]} [label={_dot_text(edge["key"])}, fontsize=8];')
    lines.append("}")
    return "\n".join(lines)


def _scoring_line(scoring: dict[str, Any]) -> str:
    files = ", ".join(f"{i['path']} (sha256 {i['sha256'][:12]})" for i in scoring["inputs"])
    return (f"scores {scoring['output']}: {scoring['rows_scored']} rows of {files} scored {scoring['start']} "
            f"by version {scoring['model_version']} of this model:")


def runs_text(runs: list[dict[str, Any]]) -> str:
    if not runs:
        return "no pipeline runs in this metadata store"
    width = max(len("dataset"), *(len(run.get("model_name") or "-") for run in runs))
    id_width = max(28, *(len(run["run_id"]) for run in runs))  # a scoring's id holds its folder's name
    header = f"{'kind':<5} {'run id':<{id_width}} {'dataset':<{width}} {'start (UTC)':<26} {'duration':>9} {'status':<9} " \
             f"{'model':>6} {'metric':<24} {'value':>8} {'blessed':<8} version"
    lines = [header]
    for run in runs:
        blessed = {True: "yes", False: "no", None: "-"}[run["blessed"]]
        # A run's version is the one it pushed; a scoring's, the one that scored.
        version = run.get("scored_version") or run["pushed_version"]
        lines.append(
            f"{run.get('kind', 'run'):<5} {run['run_id']:<{id_width}} {run.get('model_name') or '-':<{width}} "
            f"{run['start']:<26} {run['duration_s']:>8.1f}s {run['status']:<9} "
            f"{_or_dash(run['model_id']):>6} {run['metric'] or '-':<24} "
            f"{_number(run['metric_value']) if run['metric_value'] is not None else '-':>8} "
            f"{blessed:<8} {version or '-'}"
        )
    return "\n".join(lines)


def diff_text(diff: dict[str, Any]) -> str:
    a, b = diff["a"], diff["b"]
    lines = [f"a: model {a['model_id']} (run {a['run_id']})", f"b: model {b['model_id']} (run {b['run_id']})"]
    for section, changes in diff.items():
        if section in ("a", "b"):
            continue
        if not changes:
            lines.append(f"{section}: same")
            continue
        lines.append(f"{section}:")
        for key, values in changes.items():
            lines.append(f"  {key}: {_short(values['a'])} -> {_short(values['b'])}")
    return "\n".join(lines)


def _number(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def _or_dash(value: Any) -> str:
    return "-" if value is None else str(value)


def _dot_text(text: str) -> str:
    return json.dumps(text)  # a double-quoted string with escapes, as DOT reads it
