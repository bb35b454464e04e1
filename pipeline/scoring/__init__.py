"""`turbotfx score` and `turbotfx drift`: whole tables scored with a served model version,
and new rows compared with its training data, as library calls that never print (the CLI
renders them).

  inputs       the files to score, their columns checked against what the model needs, the
               id columns passed through, the rows' schema (serving/rows.py)
  job          the Beam job: rows read, checked, scored in batches through the version's own
               serving_raw signature, written as sharded CSV or Parquet, refused rows to errors-*
  score        one scoring start to end: the version chosen, the output written whole or not
               at all, a sample of rows scored again through in-process predict and compared
  guard        Ctrl-C or SIGTERM anywhere in a scoring or drift check ends it with nothing
               written; another failure is one line pointing at the log
  drift        one drift check start to end: the batch against the version's training split,
               the vocabulary shares its Transform sees, the accuracy estimate, the record
  drift_data   the columns drift compares: a split of ExampleGen's output found through the
               store's lineage, the batch's rows
  drift_stats  drift's statistics, numpy only: per feature TFDV's own distance (L-infinity,
               Jensen-Shannon), a permutation null band at the batch's size, the
               out-of-vocabulary and out-of-range shares
  performance_estimate  the batch's accuracy read off the served model's probabilities,
               calibrated on the eval split (CBPE), and its verdict against the blessing bound
"""
