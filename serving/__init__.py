"""Everything after the Pusher: versioned pushes, TF Serving's models.config, clients.

  push           atomic, versioned pushes into a model directory; retention
  model_config   models.config: the versions served, the stable and canary labels
  publish        a push and its labels as one step (push + model_config under one lock)
  reconcile      the serving directory and models.config brought back to the push records
  warmup         TF Serving warmup requests from real eval examples
  session_check  a SavedModel loaded as TF Serving loads it (run in its own process)
  forest_ops     TF-DF's ops registered before an in-process load of a gbt model
  contract       signature, input and output names (pure Python)
  rows           rows checked against the curated schema, and encoded
  client         ServingClient: TF Serving over gRPC or REST, with retries; in-process predict
  errors         the errors of serving/, as one tree

deploy/ (not Python) runs TF Serving with Compose or Kubernetes. Of pipeline/, serving/
uses only errors and atomic (tests/test_architecture.py checks).
"""
