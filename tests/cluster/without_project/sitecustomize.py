"""Loaded at start-up by a Python with this folder on PYTHONPATH: turbotfx's packages then fail
to import as they do where turbotfx is not installed (ModuleNotFoundError)."""

import importlib.abc
import sys

PROJECT_PACKAGES = {"pipeline", "components", "trainer_module", "serving"}


class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in PROJECT_PACKAGES:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NotInstalled())
