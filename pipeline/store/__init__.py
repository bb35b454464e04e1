"""The ML Metadata store: `url` (pure Python: parse a store URL, hide its password),
`connection` (opens the store with ml_metadata; one run at a time on SQLite), `integrity`
(whether a SQLite file is a store MLMD can read, asked with sqlite3 first), `backup`
(the last good copy of a SQLite store, kept after each completed run) and `study` (a
tuning study's storage, reached and checked before a run's work, as the store is).

Nothing is re-exported here: `pipeline.config` imports `pipeline.store.url`, which must
not pull in ml_metadata.
"""
