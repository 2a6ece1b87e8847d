"""search_keys over RediSearch: the query read from what an agent types, and its answer."""
