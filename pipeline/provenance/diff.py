"""What differs between two models' lineages: `turbotfx diff`."""

from __future__ import annotations

from typing import Any


def diff_models(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """What differs between two models' lineages, section by section: {name: {"a": .., "b": ..}}."""
    trainer_a, trainer_b = first["trainer"], second["trainer"]
    sections = {
        "hyperparameters": (_flat(trainer_a["hyperparameters"]), _flat(trainer_b["hyperparameters"])),
        "effective": (trainer_a["effective"], trainer_b["effective"]),
        # The file's text is there to read (lineage); its hash says that it changed.
        "dataset": (_flat(_without_text(first.get("dataset"))), _flat(_without_text(second.get("dataset")))),
        "code": ({"code_fingerprint": trainer_a["code_fingerprint"]},
                 {"code_fingerprint": trainer_b["code_fingerprint"]}),
        "data": (_data(first), _data(second)),
        "schema": (first["schema"] or {}, second["schema"] or {}),
        "metrics": ((first["evaluation"] or {}).get("metrics", {}),
                    (second["evaluation"] or {}).get("metrics", {})),
        "evaluation": (_verdict(first), _verdict(second)),
    }
    result: dict[str, Any] = {
        "a": {"model_id": first["model"]["id"], "run_id": first["pipeline"]["run_id"]},
        "b": {"model_id": second["model"]["id"], "run_id": second["pipeline"]["run_id"]},
    }
    for name, (values_a, values_b) in sections.items():
        result[name] = {
            key: {"a": values_a.get(key), "b": values_b.get(key)}
            for key in sorted(set(values_a) | set(values_b))
            if values_a.get(key) != values_b.get(key)
        }
    return result


def _without_text(dataset: dict[str, Any] | None) -> dict[str, Any]:
    return {key: value for key, value in (dataset or {}).items() if key != "text"}


def _flat(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested settings (train_args, eval_args) as dotted keys, so a diff names the leaf."""
    flat: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, dict) and value:
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = value
    return flat


def _data(lineage_json: dict[str, Any]) -> dict[str, Any]:
    examples = lineage_json["examples"] or {}
    return {f"examples.{key}": examples.get(key) for key in ("id", "uri", "span", "version", "fingerprint")}


def _verdict(lineage_json: dict[str, Any]) -> dict[str, Any]:
    evaluation = lineage_json["evaluation"] or {}
    pushed = lineage_json["pushed_model"] or {}
    return {"blessed": evaluation.get("blessed"), "baseline_model_id": evaluation.get("baseline_model_id"),
            "pushed_version": pushed.get("version")}
