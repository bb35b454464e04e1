"""ExampleGen executor for CSV files that reads the header as Python's csv module does (TFX's
own keeps a byte-order mark and quotes in the column names).

  component  TFX's CsvExampleGen (spec, driver, node id) with our executor
  executor   CSV to tf.Examples as TFX makes them, the header read as the rows are
  arrow_csv  the same tf.Examples, byte for byte, encoded with Arrow
  arrow_read pyarrow's CSV reader without its scan of every object at each read
  dialect    how a CSV is read: header, records, cell types, the first record TFX would not
             parse (standard library only: the checks before a run share it)
"""
