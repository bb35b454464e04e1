"""Resolver strategy for the Evaluator's baseline: the latest pushed model, never the candidate."""
