"""Runners: the same pipeline, run locally or compiled for an orchestrator."""
