"""The statistics of `turbotfx drift`, per feature: the distance TFDV's drift comparators use
(L-infinity for categorical, Jensen-Shannon for numeric), a permutation null band at the
batch's own row count, and the share of values the training split never had (out of
vocabulary, out of range). numpy only: no TF, no Beam.

TFDV 1.16's Jensen-Shannon divergence (anomalies/metrics.cc JensenShannonDivergence, on the
STANDARD histogram: feature_util.cc UpdateJensenShannonDivergenceComparator), reproduced:
each side's histogram has 10 equal-width buckets over its own [min, max], their counts read
off a quantiles sketch at 1,000 ranks, uniform between two ranks' values
(statistics/generators/basic_stats_generator.py, utils/quantiles_util.py; tfx_bsl's sketch
is exact under ~5,700 distinct values a side, approximate beyond, ours always exact); the
two rebucketed on the union of their edges, uniform within a bucket; a point histogram
(min == max) and +-inf values in buckets of their own; then JSD in bits (log2). Missing
values (None, NaN from a table, "") are left out, as TFDV leaves them out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Union

import numpy as np

Kind = Literal["categorical", "numeric"]
ColumnData = Union[Sequence[object], np.ndarray]  # one value a row; None, NaN or "": missing

# TFDV's StatsOptions defaults: 10 equal-width buckets, from a sketch read at 10 x 100 ranks
# (basic_stats_generator._NUM_QUANTILES_FACTOR_FOR_STD_HISTOGRAM).
HISTOGRAM_BUCKETS = 10
SKETCH_RANKS = 1000
# The null band: draws, and the chance that a batch from the training distribution has any
# feature flagged (per batch, not per feature). 1 %, so that 20 clean batches rarely show
# two alarms (at 5 % exactly, 2 or more of 20 happens one time in four); the shifts worth
# reporting sit far beyond the band at that level (tests/test_drift_stats.py).
DRAWS = 500
FAMILY_LEVEL = 0.01
# Array cells (draws x (distinct values + rows + ranks)) held at once while drawing the band.
_CELLS = 4_000_000


@dataclass(frozen=True)
class FeatureDrift:
    """One feature of the batch against the training split."""

    feature: str
    kind: Kind
    distance: float  # L-infinity (categorical) or Jensen-Shannon in bits (numeric); NaN: no values
    null_median: float  # the distance sampling alone typically gives at this row count
    null_high: float  # flagged above this (family-wise over the features)
    flagged: bool
    rows: int  # the batch's values of this feature (missing ones left out)
    oov_share: float | None = None  # categorical: values the training split never had
    out_of_range_share: float | None = None  # numeric: values outside its [min, max]


@dataclass(frozen=True)
class NullBand:
    """What sampling alone gives, per feature, between `rows` rows and the training split."""

    rows: int
    median: Mapping[str, float]
    high: Mapping[str, float]


def categorical_distance(reference_counts: Mapping[object, float], batch_counts: Mapping[object, float]) -> float:
    """TFDV's L-infinity distance of the normalized counts, over the reference's values only:
    a value it never had is the out-of-vocabulary share, not drift (TFDV would count it)."""
    known = [value for value, count in reference_counts.items() if count > 0 and not _missing(value)]
    reference = np.array([[reference_counts[value] for value in known]], dtype=float)
    batch = np.array([[batch_counts.get(value, 0) for value in known]], dtype=float)
    return float(_l_infinity(reference, batch)[0])


def numeric_distance(reference_values: ColumnData, batch_values: ColumnData) -> float:
    """TFDV's Jensen-Shannon divergence (bits) of two columns' standard histograms."""
    pooled = _Pooled.of(reference_values, batch_values, "numeric")
    return float(pooled.distances(np.arange(len(reference_values), pooled.codes.size)[None])[0])


def out_of_vocabulary_share(vocabulary: set[str], values: ColumnData) -> float:
    """The share of present values not in the vocabulary (NaN: no values)."""
    present = _strings(values)
    return float(np.mean([value not in vocabulary for value in present])) if present.size else float("nan")


def out_of_range_share(train_min: float, train_max: float, values: ColumnData) -> float:
    """The share of present values outside [train_min, train_max] (NaN: no values)."""
    numbers = _numbers(values)
    numbers = numbers[~np.isnan(numbers)]
    return float(np.mean((numbers < train_min) | (numbers > train_max))) if numbers.size else float("nan")


def null_band(reference: Mapping[str, ColumnData], batch: Mapping[str, ColumnData], kinds: Mapping[str, Kind],
              seed: int = 0, draws: int = DRAWS, level: float = FAMILY_LEVEL) -> NullBand:
    """What sampling alone gives: the training split's rows and the batch's pooled, split at
    random into the batch's row count and the rest, each split's distance per feature (a
    permutation test: exact when the batch comes from the split's distribution, whatever the
    distance's shape). Not samples of the split alone: TFDV's histograms span each side's own
    [min, max], so the distance leaps when a batch holds a value beyond the split's range,
    which the split's own values cannot show (measured on five tables like the tests': up to
    6 of 20 clean 3,000-row slices flagged at a 1 % level, and one far value in 1,000 rows
    flagged; pooled, 0 or 1 of 20 and not). Rows are drawn jointly: a draw keeps the
    features' dependence, which the family-wise bound counts on."""
    pooled = {name: _Pooled.of(reference[name], batch[name], kind) for name, kind in kinds.items()}
    return _band(pooled, _common_length(reference, kinds), _common_length(batch, kinds), seed, draws, level)


def _band(pooled: Mapping[str, _Pooled], size: int, rows: int, seed: int, draws: int, level: float) -> NullBand:
    if not size or not rows:
        raise ValueError(f"nothing to compare: {size} training rows, {rows} batch rows")
    rng = np.random.default_rng(seed)
    fake_batches = np.stack([rng.choice(size + rows, rows, replace=False) for _ in range(draws)])
    distances = np.zeros((draws, len(pooled)))
    for j, column in enumerate(pooled.values()):
        chunk = max(1, _CELLS // (column.values.size + rows + SKETCH_RANKS))  # draws at a time, within memory
        for start in range(0, draws, chunk):
            distances[start:start + chunk, j] = column.distances(fake_batches[start:start + chunk])
    median, high = _family_wise_high(np.nan_to_num(distances), level)
    return NullBand(rows=rows, median=dict(zip(pooled, median.tolist())), high=dict(zip(pooled, high.tolist())))


def _family_wise_high(distances: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Per feature (a column of draws): the null median, and the bound above which it is
    flagged so that a batch without drift has any feature flagged with probability `level`:
    each draw's largest standardized distance over the features (max-T, Westfall-Young),
    its (1 - level) quantile mapped back onto each feature. Standardized on the square root
    (both distances are square-like, JS near a chi-square: the root is near symmetric, so
    median and SD describe every feature's spread alike; a ratio to the median let the
    long-tailed features set everyone's bound, and left a 0.5 sigma shift at n = 3,000
    under it on two tables of three). Bonferroni or min-p (each feature at 1 - level / k)
    need each feature's far tail, which 500 draws hardly reach (k / level draws just to
    flag anything), and Bonferroni ignores the features' correlation."""
    roots = np.sqrt(distances)
    centre, spread = np.median(roots, axis=0), roots.std(axis=0)
    scores = np.divide(roots - centre, spread, out=np.zeros_like(roots), where=spread > 0)
    bound = float(np.quantile(scores.max(axis=1), 1 - level)) if scores.size else 0.0
    return np.median(distances, axis=0), np.maximum(centre + bound * spread, 0.0) ** 2


def compare(reference: Mapping[str, ColumnData], batch: Mapping[str, ColumnData], kinds: Mapping[str, Kind],
            seed: int = 0) -> list[FeatureDrift]:
    """Every feature in kinds, the batch against the training split; deterministic given the seed."""
    size, rows = _common_length(reference, kinds), _common_length(batch, kinds)
    pooled = {name: _Pooled.of(reference[name], batch[name], kind) for name, kind in kinds.items()}
    band = _band(pooled, size, rows, seed, DRAWS, FAMILY_LEVEL)
    result = []
    for (name, kind), column in zip(kinds.items(), pooled.values()):
        batch_rows = np.arange(size, column.codes.size)
        distance = float(column.distances(batch_rows[None])[0])
        known = np.unique(column.codes[:size])
        seen = column.values[known[known < column.values.size]]  # the split's values, sorted
        if kind == "categorical":
            outside = out_of_vocabulary_share(set(seen), batch[name])
        else:
            outside = out_of_range_share(seen[0], seen[-1], batch[name]) if seen.size else float("nan")
        present = int(np.sum(column.codes[batch_rows] < column.values.size + (kind == "numeric")))  # +-inf: present
        result.append(FeatureDrift(
            feature=name, kind=kind, distance=distance, null_median=band.median[name], null_high=band.high[name],
            # A feature the split has and the batch lacks in every row has drifted the most.
            flagged=bool(distance > band.high[name]) or (present == 0 and seen.size > 0), rows=present,
            oov_share=outside if kind == "categorical" else None,
            out_of_range_share=outside if kind == "numeric" else None))
    return result


@dataclass(frozen=True)
class _Pooled:
    """A feature's values in the split's rows then the batch's, as codes into their sorted
    distinct values (numbers: the finite ones, then a code for +-inf), missing last; and
    where each row stands once sorted by code, to read any split's order statistics."""

    kind: Kind
    values: np.ndarray
    codes: np.ndarray
    sorted_codes: np.ndarray
    position: np.ndarray

    @classmethod
    def of(cls, reference: ColumnData, batch: ColumnData, kind: Kind) -> _Pooled:
        if kind == "categorical":
            data = np.concatenate([_strings(reference, keep_missing=True), _strings(batch, keep_missing=True)])
            present, absent = data != "", np.ones(data.size, dtype=int)
        else:
            data = np.concatenate([_numbers(reference), _numbers(batch)])
            present, absent = np.isfinite(data), np.where(np.isnan(data), 1, 0)
        values, inverse = np.unique(data[present], return_inverse=True)
        codes = values.size + absent
        codes[present] = inverse
        order = np.argsort(codes, kind="stable")
        position = np.empty_like(order)
        position[order] = np.arange(order.size)
        return cls(kind, values, codes, codes[order], position)

    def distances(self, batch_rows: np.ndarray) -> np.ndarray:
        """[draws]: the distance between each row of batch_rows (row numbers) and all other rows."""
        if self.kind == "categorical":  # over the reference's values: the others are out of vocabulary
            width = self.values.size + 2
            flat = (self.codes[batch_rows] + width * np.arange(batch_rows.shape[0])[:, None]).ravel()
            batch = np.bincount(flat, minlength=width * batch_rows.shape[0]).reshape(-1, width)[:, :-2]
            return _l_infinity(np.bincount(self.codes, minlength=width)[:-2] - batch, batch)
        return _jensen_shannon(*self._histograms(batch_rows))

    def _histograms(self, batch_rows: np.ndarray) -> tuple[_Histograms, _Histograms]:
        # A side's k-th smallest value: the batch's from its own sorted codes; the rest's from
        # the pooled order, stepping over the batch's positions in it.
        size = self.values.size
        codes = np.sort(self.codes[batch_rows], axis=1)
        finite, infinite = (codes < size).sum(axis=1), (codes == size).sum(axis=1)
        wanted = _rank_index(finite)
        picks = np.take_along_axis(codes, wanted, axis=1)
        batch = _histograms(self.values, picks, _searchsorted_rows(codes, picks), finite, infinite)
        taken = np.sort(self.position[batch_rows], axis=1) - np.arange(batch_rows.shape[1])
        rest_finite = int((self.codes < size).sum()) - finite
        rest_infinite = int((self.codes == size).sum()) - infinite
        wanted = _rank_index(rest_finite)
        picks = self.sorted_codes[np.minimum(wanted + _searchsorted_rows(taken, wanted), self.codes.size - 1)]
        at_most = np.cumsum(np.bincount(self.codes, minlength=size + 2))[picks] - _searchsorted_rows(codes, picks)
        return _histograms(self.values, picks, at_most, rest_finite, rest_infinite), batch


def _rank_index(finite: np.ndarray) -> np.ndarray:
    """The sketch's answer at rank r * N / 1000 (tfx_bsl weighted_quantiles_summary.h,
    GenerateQuantilesAndCumulativeWeights, on an exact summary) is the value whose ranks
    [count below it, count up to it) hold that rank: the sorted values' floor(r N / 1000)-th."""
    ranks = np.arange(SKETCH_RANKS + 1) * finite[:, None] / SKETCH_RANKS
    return np.clip(np.floor(ranks).astype(int), 0, np.maximum(finite[:, None] - 1, 0))


@dataclass(frozen=True)
class _Histograms:
    """TFDV's standard histograms, one a row."""

    edges: np.ndarray  # [rows, buckets + 1]; all equal: a point histogram (min == max)
    counts: np.ndarray  # [rows, buckets]
    infinite: np.ndarray  # +-inf values: a bucket of their own that never matches the other side's

    @property
    def point(self) -> np.ndarray:
        return self.edges[:, 0] == self.edges[:, -1]


def _histograms(values: np.ndarray, picks: np.ndarray, cumulative: np.ndarray, finite: np.ndarray,
                infinite: np.ndarray) -> _Histograms:
    """TFDV's standard histograms from the sketch's answers, a row each: picks (codes into the
    sorted finite values) and how many values are at most each. With infinities TFDV reads
    its ranks over them too, we over the finite values only (~1e-5 apart)."""
    empty = finite == 0
    picks = np.minimum(np.where(empty[:, None], 0, picks), max(values.size - 1, 0))
    cumulative = np.where(empty[:, None], 0, cumulative).astype(float)
    values = values if values.size else np.zeros(1)
    # quantiles_util._get_bin_weights: a repeated value's weight is spread evenly over the
    # bins that end on it, and the minimum's own count goes to the first bin(s).
    low, high, weights = picks[:, :-1], picks[:, 1:], np.diff(cumulative, axis=1)
    new_run = np.ones(high.shape, dtype=bool)
    new_run[:, 1:] = high[:, 1:] != high[:, :-1]
    starts = np.flatnonzero(new_run)
    sizes = np.diff(np.append(starts, high.size))
    weights = np.repeat(np.add.reduceat(weights.ravel(), starts) / sizes, sizes).reshape(high.shape)
    lead = np.cumprod((low == low[:, :1]) & (high == high[:, :1]), axis=1).astype(bool)
    weights += lead * (cumulative[:, :1] / lead.sum(axis=1, keepdims=True))
    # generate_equi_width_histogram: the bins' weight below each edge, a bin across it split
    # by overlap (uniform within), a point bin on it counted below (the first edge: above).
    edges = np.linspace(values[picks[:, 0]], values[picks[:, -1]], HISTOGRAM_BUCKETS + 1, axis=1)
    ended = _searchsorted_rows(high.astype(float), np.searchsorted(values, edges, side="right") - 1.0)
    across = np.minimum(ended, SKETCH_RANKS - 1)
    low_value = values[np.take_along_axis(low, across, axis=1)]
    width = values[np.take_along_axis(high, across, axis=1)] - low_value
    share = np.divide(edges - low_value, width, out=np.zeros_like(edges), where=(ended < SKETCH_RANKS) & (width > 0))
    below = np.take_along_axis(np.concatenate([0 * weights[:, :1], np.cumsum(weights, axis=1)], axis=1), ended, axis=1)
    below += np.take_along_axis(weights, across, axis=1) * share
    below[:, 0] = 0.0
    return _Histograms(edges, np.diff(below, axis=1), infinite.astype(float))


def _searchsorted_rows(rows: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """np.searchsorted(row, its targets, side="right") for every row at once (integral values)."""
    span = max(np.ptp(rows), np.ptp(targets), float(rows.max() - targets.min()), float(targets.max() - rows.min())) + 2
    offset = span * np.arange(rows.shape[0])[:, None]
    found = np.searchsorted((rows + offset).ravel(), (targets + offset).ravel(), side="right")
    return found.reshape(targets.shape) - rows.shape[1] * np.arange(rows.shape[0])[:, None]


def _jensen_shannon(first: _Histograms, second: _Histograms) -> np.ndarray:
    """metrics.cc AlignHistograms + JensenShannonDivergence (bits), row by row: two wide
    histograms rebucketed on the union of their edges, each uniform within its buckets; a
    point histogram matches only the other side's point at the same value; +-inf never match."""
    grid = np.sort(np.concatenate([first.edges, second.edges], axis=1), axis=1)
    p, q = np.diff(_cdf(first, grid), axis=1), np.diff(_cdf(second, grid), axis=1)
    either, same = first.point | second.point, first.point & second.point & (first.edges[:, 0] == second.edges[:, 0])
    p[either], q[either] = 0.0, 0.0
    totals = first.counts.sum(axis=1), second.counts.sum(axis=1)
    apart = either & ~same
    p = np.column_stack([p, np.where(same, totals[0], 0), first.infinite + np.where(apart, totals[0], 0), 0 * p[:, 0]])
    q = np.column_stack([q, np.where(same, totals[1], 0), 0 * q[:, 0], second.infinite + np.where(apart, totals[1], 0)])
    with np.errstate(invalid="ignore", divide="ignore"):
        p, q = p / p.sum(axis=1, keepdims=True), q / q.sum(axis=1, keepdims=True)
        m = (p + q) / 2
        return (_kl(p, m) + _kl(q, m)) / 2


def _cdf(histograms: _Histograms, grid: np.ndarray) -> np.ndarray:
    """Each row's count at or below each of its grid points, uniform within a bucket."""
    edges, counts = histograms.edges, histograms.counts
    bucket = np.clip((edges[:, None, :] <= grid[:, :, None]).sum(axis=2) - 1, 0, HISTOGRAM_BUCKETS - 1)
    low, high = np.take_along_axis(edges, bucket, axis=1), np.take_along_axis(edges, bucket + 1, axis=1)
    within = np.clip(np.divide(grid - low, high - low, out=(grid >= high).astype(float), where=high > low), 0, 1)
    below = np.concatenate([np.zeros_like(counts[:, :1]), np.cumsum(counts, axis=1)], axis=1)
    return np.take_along_axis(below, bucket, axis=1) + np.take_along_axis(counts, bucket, axis=1) * within


def _kl(p: np.ndarray, m: np.ndarray) -> np.ndarray:
    return np.sum(np.where(p > 0, p * np.log2(np.where(p > 0, p, 1) / np.where(p > 0, m, 1)), 0.0), axis=1)


def _l_infinity(reference: np.ndarray, batch: np.ndarray) -> np.ndarray:
    """Rows of counts: the largest gap between the normalized counts, over the reference's values."""
    batch = np.where(reference > 0, batch, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        gaps = np.abs(reference / reference.sum(axis=1, keepdims=True) - batch / batch.sum(axis=1, keepdims=True))
    return gaps.max(axis=1) if gaps.shape[1] else np.full(gaps.shape[0], np.nan)


def _missing(value: object) -> bool:
    return value is None or value == "" or (isinstance(value, float) and np.isnan(value))


def _strings(column: ColumnData, keep_missing: bool = False) -> np.ndarray:
    """Present values as text ("" for a missing one when kept), so 3 and "3" are one category."""
    text = np.array(["" if _missing(value) else str(value) for value in column], dtype=str)
    return text if keep_missing else text[text != ""]


def _numbers(column: ColumnData) -> np.ndarray:
    return np.asarray(column, dtype=float)  # None: NaN, i.e. missing


def _common_length(columns: Mapping[str, ColumnData], kinds: Mapping[str, Kind]) -> int:
    lengths = {len(columns[name]) for name in kinds}
    if len(lengths) != 1:
        raise ValueError(f"the columns differ in length: {sorted(lengths)}")
    return lengths.pop()
