"""Loading the configuration: YAML file, then ``ICEMV_*`` environment overrides.

Every key can be overridden by an environment variable named after its path, sections
separated by a double underscore: ``ICEMV_CATALOG__URI``,
``ICEMV_SPARK__CONF__spark.driver.memory``.
Values are parsed as YAML scalars so that numbers, booleans and lists work.
Validation happens once at start; errors name the offending key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_args, get_origin
from urllib.parse import urlsplit

import yaml
from pydantic import (
    BaseModel,
    SecretStr,
    ValidationError,
)

from icemv.config.model import Config
from icemv.errors import ConfigError

ENV_PREFIX = "ICEMV_"
ENV_SEPARATOR = "__"


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Read the YAML file (if any), apply environment overrides, validate."""
    raw: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"config file {path} is not UTF-8 text (byte {exc.start}: {exc.reason})"
            ) from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from exc
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {path} must hold a mapping at the top level")
        raw = loaded
    _apply_env_overrides(raw, os.environ if env is None else env)
    return parse_config(raw)


def parse_config(raw: Mapping[str, Any]) -> Config:
    try:
        return Config.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            key = ".".join(str(part) for part in error["loc"]) or "(top level)"
            problems.append(f"{key}: {error['msg']}")
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems)) from None


def _apply_env_overrides(raw: dict[str, Any], env: Mapping[str, str]) -> None:
    for name, value in sorted(env.items()):
        if not name.startswith(ENV_PREFIX) or ENV_SEPARATOR not in name[len(ENV_PREFIX) :]:
            if (
                name.startswith(ENV_PREFIX)
                and name[len(ENV_PREFIX) :].lower() in Config.model_fields
            ):
                raw[name[len(ENV_PREFIX) :].lower()] = _scalar(value)
            continue
        path = name[len(ENV_PREFIX) :].split(ENV_SEPARATOR)
        node = raw
        # A map of strings (spark.conf, catalog.properties) takes the value as written:
        # `8` is the string "8" there, not a number.
        as_text = _is_string_map_entry([part.lower() for part in path[:2]])
        for depth, part in enumerate(path):
            # Section and field names are lower case; map keys (spark conf) keep their case.
            key = part.lower() if depth < 2 else part
            if depth == len(path) - 1:
                node[key] = value if as_text and depth >= 2 else _scalar(value)
            else:
                child = node.setdefault(key, {})
                if not isinstance(child, dict):
                    raise ConfigError(f"environment variable {name}: {key} is not a section")
                node = child


def _is_string_map_entry(section_and_field: list[str]) -> bool:
    """Whether `section.field` is a mapping whose values are text (e.g. `spark.conf`)."""
    if len(section_and_field) < 2:
        return False
    section = Config.model_fields.get(section_and_field[0])
    model = section.annotation if section is not None else None
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return False
    field = model.model_fields.get(section_and_field[1])
    if field is None or get_origin(field.annotation) is not dict:
        return False
    return any(arg is str for arg in get_args(get_args(field.annotation)[1]) or ()) or (
        get_args(field.annotation)[1] is str
    )


def _scalar(value: str) -> Any:
    try:
        return yaml.safe_load(value)
    except yaml.YAMLError:
        return value


def masked_dump(config: Config) -> dict[str, Any]:
    """The effective configuration with every secret replaced by asterisks."""
    masked: dict[str, Any] = _mask(config.model_dump(mode="python"))
    return masked


def _mask(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return "******"
    if isinstance(value, dict):
        return {key: _mask(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_mask(item) for item in value]
    if isinstance(value, str) and "://" in value:
        return mask_url(value)
    return value


def mask_url(url: str) -> str:
    """A URL with its password (if any) replaced, for logs and `config show`."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":******@", 1)
    return parts._replace(netloc=netloc).geturl()
