"""Pusher executor: atomic, versioned pushes with stable/canary labels and retention."""
