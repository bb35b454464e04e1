"""The ML Metadata store: `url` (pure Python: parse a store URL, hide its password) and
`connection` (opens the store with ml_metadata; one run at a time on SQLite).

Nothing is re-exported here: `pipeline.config` imports `pipeline.store.url`, which must
not pull in ml_metadata.
"""
