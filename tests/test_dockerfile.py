"""The pipeline image's Dockerfile agrees with what compiled pipelines expect of the image.

No Docker engine runs here, so the build itself is not exercised: these check the parts a
compile relies on (source tree, schema and data paths, the lock) and run the Dockerfile's
own Python snippets.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
import subprocess
import sys

from pipeline.runners import kubeflow
from tests import REPO

DOCKERFILE = (REPO / "Dockerfile").read_text()
# Shell continuations joined: one logical instruction per line.
INSTRUCTIONS = re.sub(r"\\\n", " ", DOCKERFILE)


def python_snippets() -> list[str]:
    return [shlex.split(match)[0] for match in re.findall(r'python -c ("[^"]+")', INSTRUCTIONS)]


def test_image_layout_matches_the_compiled_paths():
    assert re.search(r"^FROM python:3\.10-slim$", DOCKERFILE, re.MULTILINE)  # the final stage
    assert f"WORKDIR {kubeflow.IMAGE_SOURCE_ROOT}" in DOCKERFILE
    assert kubeflow.IMAGE_DATA_ROOT in DOCKERFILE
    # Installed from the lock, like `make` does.
    assert "pip install -c constraints.txt -r /tmp/requirements.txt" in INSTRUCTIONS
    assert "pip install --no-deps -c constraints.txt ." in INSTRUCTIONS


def test_beam_workers_can_start_in_the_image():
    """Dataflow and portable runners start workers at Beam's boot program, of the locked Beam version."""
    beam = re.search(r"^apache-beam==(\S+)$", (REPO / "constraints.txt").read_text(), re.MULTILINE).group(1)
    assert f"FROM apache/beam_python3.10_sdk:{beam} AS beam_sdk" in DOCKERFILE
    assert "COPY --from=beam_sdk /opt/apache/beam /opt/apache/beam" in DOCKERFILE
    assert re.search(r'^ENTRYPOINT \["/opt/apache/beam/boot"\]$', DOCKERFILE, re.MULTILINE)


def test_dockerfile_python_snippets_run(tmp_path):
    requirements, write_data = python_snippets()
    done = subprocess.run([sys.executable, "-c", requirements], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["tfx[kfp]==1.16.0", "apache-beam[gcp]==2.59.0", "dill", "palmerpenguins",
                                   "tf-keras>=2.16,<2.17", "tensorflow-decision-forests==1.9.2", "tomli",
                                   "optuna==5.0.0", "PyMySQL", "psycopg2-binary", "matplotlib"]
    target = tmp_path / "data" / "penguins"
    done = subprocess.run([sys.executable, "-c", write_data.replace("/turbotfx/data/penguins", str(target))],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    rows = (target / "penguins.csv").read_text().splitlines()
    assert rows[0].startswith("species,") and len(rows) == 345  # header + 344 penguins


def test_dockerignore_keeps_what_the_image_needs():
    patterns = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    needed = ["pyproject.toml", "constraints.txt", "README.md", "pipeline/pipeline.py",
              "pipeline/datasets/penguins.toml", "pipeline/datasets/penguins.schema.pbtxt", "components/atomic_pusher/executor.py",
              "trainer_module/train.py", "serving/client.py"]
    for path in needed:
        assert (REPO / path).exists(), path
        assert not any(fnmatch.fnmatch(path, p) or path.split("/")[0] == p for p in patterns), path
    for heavy in (".venv", "workspace", ".git"):
        assert heavy in patterns
