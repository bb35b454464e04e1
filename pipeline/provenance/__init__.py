"""Provenance in the ML Metadata store: what the pipeline's runs did, read back, and the few
records the pipeline itself writes there beside TFX's:

  graph      reading MLMD: type names, lineage graphs, context and event names, property readers
  lineage    where one model came from and where it went (lineage subgraphs)
  tuning     tuning results and their trials (`tune show`; lineage's tuning section)
  summary    what one pipeline run did (the end-of-run summary, a line of `runs`)
  verdict    why a model was blessed or not, from the Evaluator's records
  runs       the runs of a store, newest first
  diff       what differs between two models' lineages
  render     all of these as text for people and DOT for Graphviz
  pushes     the push history the serving directory is reconciled with; label changes (writes)
  run_state  a run's state (RUNNING, COMPLETE, ABORTED) on its context (writes)
  scorings   each `score` and `drift`: files read, the version used, what came out (writes)

Nothing is re-exported here, so importing one module loads only what it needs.
"""
