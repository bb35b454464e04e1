"""The run report: one self-contained HTML page per run (`turbotfx report`, and every run
writes one under the workspace).

  records  what the page shows, read from MLMD and the run's artifacts on disk
  files    the artifact files read without TensorFlow: statistics, anomalies, TensorBoard scalars
  charts   the plots, drawn by matplotlib to SVG offline
  markup   the HTML both pages are made of: document, stylesheet, tables, how values read
  page     the run's page: sections, tables, the charts inline; no script, no network
  diff_page  two models side by side (`turbotfx report --diff A B`)
  write    where a run's page goes, written whole or not at all

Nothing is re-exported here, so importing one module loads only what it needs.
"""
