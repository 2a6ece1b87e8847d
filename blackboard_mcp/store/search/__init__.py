"""search_keys over RediSearch, and the indexes it needs (created, upgraded, retired)."""
