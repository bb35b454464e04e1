"""How the Parquet executor writes dates and timestamps (ISO text), the contract with
`turbotfx init` (pipeline/datasets/table.py reads a table as the executor writes it) and
with a `date` feature (trainer_module/features.DATE_PATTERN). Standard library only."""

# A timestamp's wall-clock time in its own zone (the offset dropped), whole seconds.
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S"
DATE_FORMAT = "%Y-%m-%d"
