"""Reads: get_state and list_keys under the token budget, the views per mode, keyset paging,
and the change log read as a live feed."""
