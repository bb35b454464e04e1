"""How the one pipeline definition runs: on this machine (local), compiled for Vertex AI
Pipelines or Kubeflow Pipelines (kubeflow), submitted there (submit), and the Beam
settings each place needs (beam_args, beam_tuning); a local run's Beam components on a
Flink or Spark cluster (cluster: args and checks), and Spark's job server jars and a
loopback Spark cluster (spark/); Beam's local servers and worker pool on loopback
(loopback, worker_pool); the artifact folders a store does not know, set aside before a run
(leftovers)."""

# The orchestrators a pipeline compiles for and is submitted to.
TARGETS = ("vertex", "kubeflow")
