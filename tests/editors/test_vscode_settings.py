"""The VS Code extension's contributed settings (client-vscode/package.json) are the server's settings
model (citewise/settings.py): same names, types, defaults, ranges and choices, so the two cannot drift.

The extension sends every ``citewise.*`` key except its own (``citewise.server.*``, ``citewise.trace.*``)
to the server, which warns about each name it does not know; a default that differs would change the
server's behaviour for every VS Code user without anyone choosing it.
"""

from __future__ import annotations

import json
import re
from dataclasses import fields
from typing import Any

import pytest

from citewise.settings import _LIMITS, BIB_FIELD_PRESETS, PREFETCH_MODES, Settings, _camel

from ..conftest import REPO

PACKAGE = REPO / "client-vscode" / "package.json"
CLIENT_SETTINGS_TS = REPO / "client-vscode" / "src" / "settings.ts"
# The extension's own keys (never sent to the server), as the extension's settings.ts lists them.
CLIENT_ONLY = {"citewise.server.command", "citewise.trace.server"}
JSON_TYPES = {bool: "boolean", int: "integer", str: "string", tuple: "array", dict: "object"}
ENUMS = {"prefetch": PREFETCH_MODES, "bibFields": BIB_FIELD_PRESETS}


def _properties() -> dict[str, dict[str, Any]]:
    data = json.loads(PACKAGE.read_text(encoding="utf-8"))
    return data["contributes"]["configuration"]["properties"]


def _server_fields() -> dict[str, Any]:
    """camelCase name -> the field's default, for every server setting."""
    defaults = Settings()
    return {_camel(f.name): getattr(defaults, f.name) for f in fields(Settings) if f.name != "extra"}


def _server_properties() -> dict[str, dict[str, Any]]:
    return {k.removeprefix("citewise."): v for k, v in _properties().items() if k not in CLIENT_ONLY}


def test_every_key_is_namespaced_and_the_client_keys_are_known() -> None:
    props = _properties()
    assert all(k.startswith("citewise.") for k in props), sorted(props)
    assert CLIENT_ONLY <= props.keys(), "the extension's own settings are missing from package.json"


def test_the_extension_filters_exactly_its_own_keys() -> None:
    """settings.ts drops the top-level keys ``server`` and ``trace`` before sending; they must be the
    first segments of the client-only settings, and no server setting may start with one."""
    text = CLIENT_SETTINGS_TS.read_text(encoding="utf-8")
    match = re.search(r"CLIENT_ONLY_KEYS[^=]*=\s*\[([^\]]*)\]", text)
    assert match, "CLIENT_ONLY_KEYS not found in client-vscode/src/settings.ts"
    dropped = set(re.findall(r'"([^"]+)"', match.group(1)))
    assert dropped == {k.split(".")[1] for k in CLIENT_ONLY}
    assert not dropped & _server_fields().keys()


def test_every_contributed_setting_is_a_server_setting() -> None:
    server = _server_fields()
    for name in _server_properties():
        assert "." not in name, f"citewise.{name}: the server's settings are flat (section citewise)"
        assert name in server, f"citewise.{name} is not a setting of citewise/settings.py ({sorted(server)})"
        _, problems = Settings.from_dict(json.loads(json.dumps({name: server[name]})))
        assert problems == [], problems


def test_every_server_setting_is_contributed() -> None:
    missing = _server_fields().keys() - _server_properties().keys()
    assert not missing, f"server settings without a VS Code setting: {sorted(missing)}"


@pytest.mark.parametrize("name", sorted(_server_fields()))
def test_type_default_range_and_choices_match(name: str) -> None:
    prop = _server_properties()[name]
    default = _server_fields()[name]
    assert prop["type"] == JSON_TYPES[type(default)], (name, prop["type"])
    expected = list(default) if isinstance(default, tuple) else default
    assert prop["default"] == expected, f"citewise.{name}: default {prop['default']!r}, server {expected!r}"
    snake = next(f.name for f in fields(Settings) if _camel(f.name) == name)
    if snake in _LIMITS:
        assert (prop.get("minimum"), prop.get("maximum")) == _LIMITS[snake], name
    else:
        assert "minimum" not in prop and "maximum" not in prop, name
    if name in ENUMS:
        assert tuple(prop["enum"]) == ENUMS[name], name
    elif "enum" in prop:
        pytest.fail(f"citewise.{name} has choices the server does not check: {prop['enum']}")
    # The contributed default is accepted by the server as it is sent (JSON, camelCase).
    settings, problems = Settings.from_dict(json.loads(json.dumps({name: prop["default"]})))
    assert problems == [] and getattr(settings, snake) == default
