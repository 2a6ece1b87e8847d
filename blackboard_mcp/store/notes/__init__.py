"""Notes and writes: addresses, what a note is, tables, the compare-and-swap write, appends,
the commit's sequence number, links, and token counts."""
