"""Whole-pipeline tests (marked e2e): real runs through the CLI, minutes each."""
