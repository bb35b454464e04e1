# The turbotfx pipeline image. Every component of a compiled pipeline runs in it (Vertex AI
# Pipelines, Kubeflow Pipelines, Vertex AI Training), and Dataflow / portable Beam workers
# do too by default, so all of them run the same TFX, TF and trainer_module code.
#   docker build -t REGION-docker.pkg.dev/PROJECT/REPO/turbotfx:TAG .
FROM python:3.10-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /turbotfx

# Dependencies first, from the lock: a source change rebuilds only the layers below.
# (pip's vendored TOML parser reads pyproject.toml's dependency list.)
COPY pyproject.toml constraints.txt ./
RUN python -c "from pip._vendor import tomli; \
print('\n'.join(tomli.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
 && pip install -c constraints.txt -r /tmp/requirements.txt \
 && rm /tmp/requirements.txt

# The source tree stays at /turbotfx: compiled pipelines name the curated schema by its
# path here (pipeline/runners/kubeflow.py, IMAGE_SOURCE_ROOT).
COPY . .
RUN pip install --no-deps -c constraints.txt . \
 && python -c "from pathlib import Path; from pipeline import data; \
data.write_penguins_csv(Path('/turbotfx/data/penguins') / data.PENGUINS_FILE)"

# KubeflowV2DagRunner sets each component's command; this is for running it by hand.
ENTRYPOINT ["python", "-m", "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"]
