"""Server-side reading of a file named by ``update_state(source_path=...)``: confined to
``BB_SOURCE_ROOT``, off the event loop, summarised."""
