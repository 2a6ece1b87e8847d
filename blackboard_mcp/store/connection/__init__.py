"""Redis plumbing: where a workspace lives (one Redis or a cluster slot), the pool, the
store's own connection, the one transaction helper, key names, and redis-py's errors
mapped to the store's."""
