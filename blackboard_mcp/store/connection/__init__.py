"""Redis plumbing: where a workspace lives (one Redis or a cluster slot), the board's client
of one node that placement hands out (redis-py's commands, the store's round trips and
transactions, the operation's deadline), the pool, the store's own connection, the one
transaction helper, key names, the search index's upkeep, and redis-py's errors mapped to
the store's."""
