"""docs/configuration.md and packaging/contivd.toml are generated from the options table and
must be committed up to date (regenerate: python3 -m contivd.configdoc --write)."""

from __future__ import annotations

import tomllib

from contivd import configdoc
from contivd.config import OPTIONS, load


def test_configuration_md_is_up_to_date() -> None:
    assert configdoc.MARKDOWN_PATH.read_text() == configdoc.markdown(), f"docs/configuration.md is stale: run {configdoc.REGENERATE}"


def test_packaged_toml_is_up_to_date() -> None:
    assert configdoc.TOML_PATH.read_text() == configdoc.toml(), f"packaging/contivd.toml is stale: run {configdoc.REGENERATE}"


def test_every_option_is_documented_with_flag_env_and_key() -> None:
    markdown, toml = configdoc.markdown(), configdoc.toml()
    for option in OPTIONS:
        assert f"`{option.env}` | `{option.name}` |" in markdown
        assert f"\n#{option.name} = " in toml


def test_uncommenting_every_line_of_the_packaged_toml_gives_the_defaults() -> None:
    text = "\n".join(
        line[1:] if line.startswith("#") and " = " in line and not line.startswith("# ") else line for line in configdoc.toml().splitlines()
    )
    values = tomllib.loads(text)
    assert set(values) == {o.name for o in OPTIONS}
    values.pop("node_name"), values.pop("cluster_secret")  # examples: their defaults depend on the machine / are none
    config = load({}, None, {})
    for name, value in values.items():
        parsed = next(o for o in OPTIONS if o.name == name).parse(value) if value not in ("", []) else getattr(config, name)
        assert parsed == getattr(config, name), name
