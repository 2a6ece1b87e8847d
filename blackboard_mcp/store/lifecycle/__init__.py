"""A workspace's data over time: retention, delete, restoring a past version, export and import."""
