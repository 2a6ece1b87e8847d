"""The embedded Redis: launched from PyPI wheels, dying with its parent, its orphans stopped."""
