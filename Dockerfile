# The turbotfx pipeline image. Every component of a compiled pipeline runs in it (Vertex AI
# Pipelines, Kubeflow Pipelines, Vertex AI Training), and Dataflow / portable Beam workers
# do too by default, so all of them run the same TFX, TF and trainer_module code.
#   docker build -t REGION-docker.pkg.dev/PROJECT/REPO/turbotfx:TAG .
# Beam's SDK harness boot program, from the SDK image of the pinned Beam version: a Beam
# worker container (Dataflow runner v2, Flink/Spark DOCKER environment) must start with it.
FROM apache/beam_python3.10_sdk:2.59.0 AS beam_sdk

FROM python:3.10-slim
COPY --from=beam_sdk /opt/apache/beam /opt/apache/beam

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
 && python -c "from pathlib import Path; from pipeline import datasets; from pipeline.datasets import prepare; \
prepare.write_penguins_csv(Path('/turbotfx/data/penguins') / prepare.PENGUINS_FILE, datasets.load('penguins'))"

# Beam workers start at the boot program. Vertex AI / Kubeflow tasks and Vertex AI Training
# jobs set their own command (python -m ...), which replaces this entrypoint.
ENTRYPOINT ["/opt/apache/beam/boot"]
