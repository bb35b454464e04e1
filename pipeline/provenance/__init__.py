"""Questions answered from the ML Metadata store, the read side of provenance:

  lineage   where one model came from and where it went (lineage subgraphs)
  summary   what one pipeline run did (the end-of-run summary, a line of `runs`)
  runs      the runs of a store, newest first
  diff      what differs between two models' lineages
  render    all of these as text for people and DOT for Graphviz

Nothing is re-exported here, so importing one module loads only what it needs.
"""
