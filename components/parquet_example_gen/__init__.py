"""ExampleGen executor for Parquet files that keeps zeros (TFX's own drops them)."""
