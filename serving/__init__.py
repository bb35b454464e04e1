"""Everything after the Pusher: versioned pushes, TF Serving's models.config, clients."""
