"""A Trainer executor that records the training report on the Model artifact in MLMD."""
