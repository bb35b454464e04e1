"""A deterministic synthetic e-commerce dataset of any size: did a session end in a purchase?

Each row is a shopping session: numeric features (price, discount, session length, ...)
and categoricals whose vocabularies span 10 to 100,000 values (channel, country,
category, brand, product). The label is drawn from a known logistic model of those
features, so the signal is learnable and the best achievable accuracy (the Bayes rate)
is known; it is reported in the manifest beside the data.

Rows are generated in shards, in parallel processes; each shard's random stream depends
only on the seed and the shard number, so the same row count gives the same files
whatever the machine.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

LABEL = "purchased"
COLUMNS = (
    LABEL, "channel", "country", "category", "brand", "product_id", "price", "discount_pct",
    "session_seconds", "pages_viewed", "days_since_last_visit", "cart_items",
)

SEED = 20261202
ROWS_PER_SHARD = 125_000
MAX_SHARDS = 64
VOCABULARY_SIZES = {"channel": 10, "country": 200, "category": 1_000, "brand": 10_000, "product_id": 100_000}
CHANNELS = ("web", "ios_app", "android_app", "email", "search", "social", "affiliate", "display",
            "direct", "referral")
# Share of sessions from first-time visitors, whose days_since_last_visit is missing.
FIRST_VISIT_SHARE = 0.1


def shard_count(rows: int) -> int:
    return max(1, min(MAX_SHARDS, math.ceil(rows / ROWS_PER_SHARD)))


def shard_sizes(rows: int) -> list[int]:
    shards = shard_count(rows)
    return [rows // shards + (1 if i < rows % shards else 0) for i in range(shards)]


def generate(directory: Path, rows: int, workers: int | None = None) -> dict:
    """Writes `rows` sessions as CSV shards into directory (created whole, atomically).

    Returns the manifest (rows, shards, seed, Bayes accuracy), also written as
    `<directory>.json`. The shards appear together by one rename, so an interrupted
    run never leaves a partial dataset for ExampleGen.
    """
    if rows < 1:
        raise ValueError(f"rows must be positive, got {rows}")
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}-", dir=directory.parent))
    try:
        sizes = shard_sizes(rows)
        jobs = [(staging, index, len(sizes), size) for index, size in enumerate(sizes)]
        workers = workers or min(len(jobs), os.cpu_count() or 1)
        if workers > 1:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                results = list(pool.map(_write_shard, jobs))
        else:
            results = [_write_shard(job) for job in jobs]
        staging.chmod(0o755)  # mkdtemp makes it private to the owner
        if directory.exists():
            shutil.rmtree(directory)
        os.replace(staging, directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    manifest = {
        "rows": rows,
        "shards": len(sizes),
        "seed": SEED,
        "positive_rate": round(sum(r["positives"] for r in results) / rows, 4),
        "bayes_accuracy": round(sum(r["bayes_correct"] for r in results) / rows, 4),
    }
    manifest_path = directory.parent / f"{directory.name}.json"
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def _write_shard(job: tuple[Path, int, int, int]) -> dict:
    staging, index, shards, size = job
    frame, probability = sessions(size, np.random.default_rng([SEED, index]))
    frame.to_csv(staging / f"part-{index:05d}-of-{shards:05d}.csv", index=False, float_format="%.6g")
    labels = frame[LABEL].to_numpy()
    return {
        "positives": int(labels.sum()),
        # The Bayes classifier predicts the likelier class; it is right with that probability.
        "bayes_correct": float(np.maximum(probability, 1 - probability).sum()),
    }


def sessions(rows: int, rng: np.random.Generator):
    """A DataFrame of `rows` sessions (CSV column order) and each one's purchase probability."""
    import pandas as pd

    effects = _category_effects()
    ids = {key: _zipf_ids(rng, size, rows) for key, size in VOCABULARY_SIZES.items()}
    price = np.exp(rng.normal(3.5, 1.0, rows))
    discount = np.round(rng.beta(1.2, 6.0, rows) * 60, 1)
    session_seconds = np.round(np.exp(rng.normal(5.0, 0.9, rows)))
    pages = rng.poisson(4.0, rows) + 1
    days = np.round(rng.exponential(20.0, rows), 1)
    first_visit = rng.random(rows) < FIRST_VISIT_SHARE
    cart_items = rng.poisson(1.2, rows)

    # The known signal: a logistic model over standardized features, one interaction
    # (discounts matter more in long sessions) and per-category effects.
    z_price = np.log(price) - 3.5
    z_discount = (discount - 8.7) / 7.0
    z_session = np.log(session_seconds) - 5.0
    z_pages = (pages - 5.0) / 2.0
    z_days = np.where(first_visit, 0.0, (days - 20.0) / 20.0)
    z_cart = (cart_items - 1.2) / 1.1
    logit = (
        -0.6 - 0.7 * z_price + 0.8 * z_discount + 0.6 * z_session + 0.5 * z_pages
        - 0.5 * z_days + 0.9 * z_cart + 0.5 * z_discount * z_session
        - 0.4 * first_visit
        + sum(effects[key][ids[key]] for key in VOCABULARY_SIZES)
    )
    probability = 1.0 / (1.0 + np.exp(-logit))
    purchased = (rng.random(rows) < probability).astype(np.int64)

    columns = {
        LABEL: purchased,
        "channel": np.asarray(CHANNELS)[ids["channel"]],
        "country": _names("country", ids["country"], 3),
        "category": _names("category", ids["category"], 4),
        "brand": _names("brand", ids["brand"], 5),
        "product_id": _names("product", ids["product_id"], 6),
        "price": np.round(price, 2),
        "discount_pct": discount,
        "session_seconds": session_seconds,
        "pages_viewed": pages,
        "days_since_last_visit": np.where(first_visit, np.nan, days),
        "cart_items": cart_items,
    }
    frame = pd.DataFrame(columns)[list(COLUMNS)]
    return frame, probability


def _category_effects() -> dict[str, np.ndarray]:
    """Each category value's fixed contribution to the logit (the same for every shard)."""
    rng = np.random.default_rng([SEED, 1_000_000])
    # Large effects for the few channels, small ones for the many products.
    scale = {"channel": 0.8, "country": 0.4, "category": 0.5, "brand": 0.3, "product_id": 0.3}
    return {key: rng.normal(0.0, scale[key], size) for key, size in VOCABULARY_SIZES.items()}


def _zipf_ids(rng: np.random.Generator, size: int, rows: int) -> np.ndarray:
    """Ids in [0, size) with a power-law frequency, as popularity is in shops."""
    weights = 1.0 / np.arange(1, size + 1) ** 0.8
    cumulative = np.cumsum(weights)
    return np.searchsorted(cumulative, rng.random(rows) * cumulative[-1])


def _names(prefix: str, ids: np.ndarray, width: int) -> np.ndarray:
    return np.char.add(f"{prefix}_", np.char.zfill(ids.astype(str), width))
