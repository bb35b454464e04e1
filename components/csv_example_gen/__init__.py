"""ExampleGen executor for CSV files that reads the header as Python's csv module does (TFX's
own keeps a byte-order mark and quotes in the column names)."""
