"""``kubectl compactor``: what the policies would free on a live cluster, read-only."""
