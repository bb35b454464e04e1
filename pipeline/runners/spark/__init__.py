"""Beam on a Spark cluster: the job server jars."""
