"""A workspace's data over time: retention, delete, export and import."""
