"""Evaluator executor that records the overall metrics on the ModelEvaluation artifact."""
