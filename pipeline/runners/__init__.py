"""How the one pipeline definition runs: on this machine (local), compiled for Vertex AI
Pipelines or Kubeflow Pipelines (kubeflow), submitted there (submit), and the Beam
settings each place needs (beam_args, beam_tuning)."""

# The orchestrators a pipeline compiles for and is submitted to.
TARGETS = ("vertex", "kubeflow")
