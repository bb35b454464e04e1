"""`make lint`'s type check can fail: mypy under the project's config reports a type error.

That the tree itself is clean is `make lint` (run before `make test`), not a test here.
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_with_the_project_config_rejects_a_type_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text('x: int = "a"\n')
    # A file named on the command line replaces the config's `files`; the cache stays out of the tree.
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(tmp_path / "cache"), str(bad)],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "bad.py:1: error:" in result.stdout
    assert "[assignment]" in result.stdout
