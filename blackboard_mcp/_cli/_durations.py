"""Durations as people type them: a whole number and a unit, e.g. 90s, 30m, 12h or 7d."""

from __future__ import annotations

import argparse
import re

FORMAT = "a whole number and a unit: s, m, h or d (90s, 30m, 12h, 7d)"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> int:
    """Seconds; a number without a unit is refused (is 30 seconds, minutes or days?)."""
    match = re.fullmatch(r"(\d{1,9})([smhd])", text.strip())
    if not match:
        hint = " (add the unit)" if text.strip().isdigit() else ""
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration{hint}: use {FORMAT}")
    return int(match.group(1)) * _UNITS[match.group(2)]
