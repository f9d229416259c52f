"""The embedded engine's settings, `refresh.arrow_*` until 2026-11-28, are
`refresh.embedded_*`: an old name still sets the new one, with a deprecation warning (the
CLI turns it into one `deprecated_setting` log line); both names at once are an error."""

from __future__ import annotations

import warnings

import pytest

from icemv.config import parse_config
from icemv.config.model import RENAMED_REFRESH_KEYS
from icemv.errors import ConfigError


@pytest.mark.parametrize(("old", "new"), sorted(RENAMED_REFRESH_KEYS.items()))
def test_an_old_name_sets_the_new_one_and_says_so(old: str, new: str) -> None:
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", FutureWarning)
        config = parse_config({"refresh": {old: 7}})
    assert getattr(config.refresh, new) == 7
    assert [str(w.message) for w in said] == [
        f"refresh.{old} is deprecated: it is now refresh.{new}"
    ]


def test_both_names_are_an_error() -> None:
    with pytest.raises(ConfigError, match="both given"):
        parse_config({"refresh": {"arrow_max_rows": 1, "embedded_max_rows": 2}})


def test_the_new_names_load_quietly() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        config = parse_config({"refresh": {"embedded_join_max_rows": 3}})
    assert config.refresh.embedded_join_max_rows == 3
