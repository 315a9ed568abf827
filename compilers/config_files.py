"""Configuration files bt_exec reads: JSON (catalogs, scenes, sim scripts, checked against a shipped schema)
and YAML (motion limits, cell poses)."""
from __future__ import annotations

import json
import pathlib
from functools import lru_cache
from importlib import resources

import jsonschema

from bt_exec.errors import ConfigError


def read_json_file(path: str | pathlib.Path, what: str) -> object:
    """The JSON document in file ``path``; ConfigError naming ``what`` it was meant to be if it cannot be had."""
    try:
        return json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"{what} {path} is not valid JSON: {exc}") from None


def read_yaml_file(path: str | pathlib.Path, what: str) -> object:
    """The YAML document in file ``path`` (safe loader: data only); ConfigError naming ``what`` it was meant to be."""
    import yaml

    try:
        text = pathlib.Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {what} {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{what} {path} is not valid YAML: {' '.join(str(exc).split())}") from None


def check_schema(data: object, schema_file: str, what: str) -> None:
    """ConfigError at the first place (by path) where ``data`` breaks ``schemas/<schema_file>``."""
    problems = sorted(schema_validator(schema_file).iter_errors(data), key=lambda e: list(e.absolute_path))
    if problems:
        where = "/" + "/".join(str(p) for p in problems[0].absolute_path)
        raise ConfigError(f"{what} is invalid at {where}: {problems[0].message}")


@lru_cache(maxsize=None)
def schema_validator(schema_file: str) -> jsonschema.Draft202012Validator:
    text = resources.files("bt_exec.schemas").joinpath(schema_file).read_text(encoding="utf-8")
    return jsonschema.Draft202012Validator(json.loads(text))
