"""Human durations in view properties: `90s`, `5m`, `1h30m`, `2d`, or plain seconds."""

from __future__ import annotations

import re

from icemv.errors import DurationError

_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str) -> float:
    """Seconds in `text`; raises DurationError naming the text when it is not a duration."""
    compact = text.strip().lower().replace(" ", "")
    try:
        seconds = float(compact)
    except ValueError:
        parts = _PART.findall(compact)
        if not parts or "".join(n + u for n, u in parts) != compact:
            raise DurationError(f"not a duration: {text!r} (use e.g. 30s, 5m, 1h30m)") from None
        seconds = sum(float(n) * _UNIT[u] for n, u in parts)
    if seconds <= 0:
        raise DurationError(f"duration must be positive: {text!r}")
    return seconds
