"""Submits a compiled pipeline: a Vertex AI PipelineJob, or a run on Kubeflow Pipelines.

build_request assembles exactly what would be sent, offline; submit sends it. Runtime
parameters given as text are typed from the compiled spec (an unknown name or a value of
the wrong type fails before anything is sent).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import re
from pathlib import Path
from typing import Any

import yaml

from pipeline.errors import ConfigError, first_line
from pipeline.runners import TARGETS

KFP_TOKEN_ENV = "TURBOTFX_KFP_TOKEN"
_PARAMETER_TYPES = {"STRING": str, "NUMBER_INTEGER": int, "NUMBER_DOUBLE": float, "BOOLEAN": bool}


@dataclasses.dataclass(frozen=True)
class SubmitOptions:
    target: str
    package: str  # the compiled file
    parameters: dict[str, str] = dataclasses.field(default_factory=dict)  # NAME -> text value
    display_name: str | None = None
    job_id: str | None = None  # Vertex; default <pipeline name>-<UTC timestamp>
    pipeline_root: str | None = None  # override the compiled one
    enable_caching: bool | None = None  # None: as compiled
    service_account: str | None = None
    project: str | None = None  # Vertex
    region: str | None = None  # Vertex
    host: str | None = None  # Kubeflow
    experiment: str = "turbotfx"  # Kubeflow


def load_package(path: str) -> dict[str, Any]:
    """The compiled file as a dict: a PipelineJob (Vertex JSON) or a PipelineSpec (KFP YAML)."""
    package = Path(path)
    if not package.is_file():
        raise ConfigError(f"no compiled pipeline at {package}; create it with `turbotfx compile`")
    try:
        loaded = yaml.safe_load(package.read_text())  # JSON is YAML too
    except yaml.YAMLError as err:
        raise ConfigError(f"{package} is not a compiled pipeline (unreadable: {err}); "
                          "create it with `turbotfx compile`") from None
    if not isinstance(loaded, dict) or not ("pipelineSpec" in loaded or "root" in loaded):
        raise ConfigError(f"{package} is not a compiled pipeline; create it with `turbotfx compile`")
    return loaded


def typed_parameters(spec: dict[str, Any], given: dict[str, str]) -> dict[str, Any]:
    """Text values converted to each runtime parameter's compiled type."""
    declared = spec.get("root", {}).get("inputDefinitions", {}).get("parameters", {})
    values: dict[str, Any] = {}
    for name, text in given.items():
        if name not in declared:
            raise ConfigError(f"the pipeline has no parameter {name!r}; it takes: {', '.join(sorted(declared))}")
        kind = declared[name].get("parameterType") or declared[name].get("type", "STRING")
        wanted = _PARAMETER_TYPES.get({"INT": "NUMBER_INTEGER", "DOUBLE": "NUMBER_DOUBLE"}.get(kind, kind), str)
        try:
            values[name] = (text.lower() in ("1", "true", "yes")) if wanted is bool else wanted(text)
        except ValueError:
            raise ConfigError(f"parameter {name}={text!r} is not a valid {wanted.__name__}") from None
    return values


def parse_parameter(text: str) -> tuple[str, str]:
    """'epochs=30' -> ('epochs', '30')."""
    name, sep, value = text.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ConfigError(f"parameter {text!r} is not NAME=VALUE; use e.g. --param epochs=30")
    return name, value


def build_request(options: SubmitOptions) -> dict[str, Any]:
    """What submit would send, as JSON-ready data (no network, no credentials)."""
    _validate(options)
    package = load_package(options.package)
    if options.target == "vertex":
        return _vertex_request(options, package, _anonymous_credentials())
    return _kubeflow_request(options, package)


def submit(options: SubmitOptions) -> dict[str, Any]:
    """Sends the run; returns what the service answered (job name / run id and a link)."""
    _validate(options)
    package = load_package(options.package)
    if options.target == "vertex":
        return _submit_vertex(options, package)
    return _submit_kubeflow(options, package)


def _validate(options: SubmitOptions) -> None:
    if options.target not in TARGETS:
        raise ConfigError(f"unknown target {options.target!r}; choose one of: {', '.join(TARGETS)}")
    if options.target == "vertex":
        missing = [f for f, v in (("--project", options.project), ("--region", options.region)) if not v]
        if missing:
            raise ConfigError(f"a Vertex AI submit needs {' and '.join(missing)} "
                              "(e.g. --project my-project --region us-central1)")
        if options.pipeline_root and not options.pipeline_root.startswith("gs://"):
            raise ConfigError(f"pipeline root {options.pipeline_root!r}: Vertex AI writes artifacts to "
                              "Cloud Storage; use a gs://BUCKET/... path")
    elif not options.host:
        raise ConfigError("a Kubeflow submit needs --host, the KFP API endpoint "
                          "(e.g. http://localhost:8080 after `kubectl port-forward -n kubeflow "
                          "svc/ml-pipeline-ui 8080:80`)")


def _spec(package: dict[str, Any]) -> dict[str, Any]:
    return package.get("pipelineSpec", package)


def _pipeline_name(package: dict[str, Any]) -> str:
    return _spec(package).get("pipelineInfo", {}).get("name", "turbotfx")


# --- Vertex AI ---------------------------------------------------------------------------

def _anonymous_credentials():
    from google.auth.credentials import AnonymousCredentials

    return AnonymousCredentials()


def _vertex_job(options: SubmitOptions, package: dict[str, Any], credentials):
    from google.cloud import aiplatform

    if "pipelineSpec" not in package:
        raise ConfigError(f"{options.package} is a Kubeflow pipeline spec; compile with --target vertex "
                          "for Vertex AI")
    job_id = options.job_id or "{}-{}".format(
        _pipeline_name(package), datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d%H%M%S"))
    job = aiplatform.PipelineJob(
        display_name=options.display_name or package.get("displayName") or _pipeline_name(package),
        template_path=options.package,
        job_id=job_id,
        pipeline_root=options.pipeline_root,
        parameter_values=typed_parameters(_spec(package), options.parameters),
        enable_caching=options.enable_caching,
        project=options.project,
        location=options.region,
        credentials=credentials,
    )
    if options.service_account:
        # What PipelineJob.submit(service_account=...) sets before sending.
        job._gca_resource.service_account = options.service_account
    return job


def _vertex_request(options: SubmitOptions, package: dict[str, Any], credentials) -> dict[str, Any]:
    from google.cloud.aiplatform_v1.types import pipeline_service

    job = _vertex_job(options, package, credentials)
    request = pipeline_service.CreatePipelineJobRequest(
        parent=job._parent, pipeline_job=job._gca_resource, pipeline_job_id=job.job_id)
    return json.loads(pipeline_service.CreatePipelineJobRequest.to_json(request))


def _submit_vertex(options: SubmitOptions, package: dict[str, Any]) -> dict[str, Any]:
    import google.auth
    from google.auth import exceptions as auth_exceptions

    try:
        credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    except auth_exceptions.DefaultCredentialsError as err:
        raise ConfigError(
            f"no usable Google Cloud credentials ({first_line(err)}); run `gcloud auth "
            "application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS to a service account key file"
        ) from None
    job = _vertex_job(options, package, credentials)
    try:
        job.submit(service_account=options.service_account)
    except (auth_exceptions.GoogleAuthError, auth_exceptions.RefreshError) as err:
        raise ConfigError(f"Google Cloud refused the credentials ({first_line(err)}); "
                          "refresh them with `gcloud auth application-default login`") from None
    return {"job": job.resource_name, "link": job._dashboard_uri()}


# --- Kubeflow Pipelines ------------------------------------------------------------------

def _kubeflow_run(options: SubmitOptions, package: dict[str, Any]):
    import kfp_server_api
    from kfp.client import client as kfp_client

    if "pipelineSpec" in package:
        raise ConfigError(f"{options.package} is a Vertex AI PipelineJob; compile with --target kubeflow "
                          "(a .yaml pipeline spec) for Kubeflow Pipelines")
    # What kfp.Client.create_run_from_pipeline_package builds (its helpers, no client needed).
    document = kfp_client._extract_pipeline_yaml(options.package)
    if options.enable_caching is not None:
        kfp_client._override_caching_options(document.pipeline_spec, options.enable_caching)
    return kfp_server_api.V2beta1Run(
        display_name=options.display_name or _pipeline_name(package),
        pipeline_spec=document.to_dict(),
        runtime_config=kfp_server_api.V2beta1RuntimeConfig(
            pipeline_root=options.pipeline_root,
            parameters=typed_parameters(_spec(package), options.parameters),
        ),
        service_account=options.service_account,
    )


def _kubeflow_request(options: SubmitOptions, package: dict[str, Any]) -> dict[str, Any]:
    import kfp_server_api

    run = _kubeflow_run(options, package)
    body = kfp_server_api.ApiClient().sanitize_for_serialization(run)
    return {"host": options.host, "experiment": options.experiment, "run": body}


def _submit_kubeflow(options: SubmitOptions, package: dict[str, Any]) -> dict[str, Any]:
    import kfp
    import kfp_server_api
    import urllib3

    assert options.host is not None  # _validate requires --host for Kubeflow
    run = _kubeflow_run(options, package)
    try:
        client = kfp.Client(host=options.host, existing_token=os.environ.get(KFP_TOKEN_ENV))
        experiment = client.create_experiment(name=options.experiment)
        run.experiment_id = experiment.experiment_id
        created = client._run_api.create_run(body=run)
    except urllib3.exceptions.MaxRetryError as err:
        # The reason reads "<HTTPConnection object at 0x...>: Failed to establish ...": keep the cause.
        reason = first_line(err.reason).split(">: ", 1)[-1]
        raise ConfigError(f"nothing answers at {options.host} ({reason}); check --host "
                          "(e.g. `kubectl port-forward -n kubeflow svc/ml-pipeline-ui 8080:80`, then "
                          "--host http://localhost:8080)") from None
    except kfp_server_api.ApiException as err:
        if err.status in (401, 403):
            raise ConfigError(f"Kubeflow Pipelines at {options.host} refused the credentials "
                              f"({err.status} {err.reason}); put a valid token in ${KFP_TOKEN_ENV}") from None
        raise ConfigError(f"Kubeflow Pipelines at {options.host} rejected the run "
                          f"({err.status} {err.reason}): {first_line(err.body)}") from None
    return {"run_id": created.run_id, "experiment_id": experiment.experiment_id,
            "link": f"{options.host.rstrip('/')}/#/runs/details/{created.run_id}"}

