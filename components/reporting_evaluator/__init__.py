"""Evaluator executor that records the metrics (overall, against the baseline, per slice) on
the ModelEvaluation artifact."""
