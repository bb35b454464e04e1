"""ServingCheck: the candidate model loaded and queried the way TF Serving will, before any push."""
