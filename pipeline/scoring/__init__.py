"""`turbotfx score`: whole tables scored with a served model version, as library calls that
never print (the CLI renders them).

  inputs  the files to score, their columns checked against what the model needs, the id
          columns passed through, the rows' schema (serving/rows.py)
  job     the Beam job: rows read, checked, scored in batches through the version's own
          serving_raw signature, written as sharded CSV or Parquet, refused rows to errors-*
  score   one scoring start to end: the version chosen, the output written whole or not at
          all, a sample of rows scored again through in-process predict and compared
"""
