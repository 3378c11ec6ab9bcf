"""A mapping key that is itself a list or a mapping (`? [a, b]`): no reader of eksinf's can
hold it, and a text that has one is refused as invalid YAML naming where, never a traceback,
whether the text is read as a hand-written source, a machine-written one or a handed-in unit."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from eksinf.core import cache, yamlio
from eksinf.errors import CONTRACT, EksinfError

TEXTS = ["? [a, b]\n: c\n", "x:\n  ? {a: 1}\n  : y\n", "- k: v\n  ? [1]\n  : z\n"]


@pytest.fixture(autouse=True)
def _no_cache():
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cache, "enabled", lambda: False)
        yield


@pytest.mark.parametrize("text", TEXTS)
def test_a_machine_written_text_with_an_unhashable_key_is_a_yaml_error(text: str):
    with pytest.raises(yaml.MarkedYAMLError, match="found unhashable key"):
        yamlio.load_docs(text, "out.yaml")


@pytest.mark.parametrize("text", TEXTS)
def test_a_handed_in_unit_with_an_unhashable_key_is_refused_naming_where(text: str):
    with pytest.raises(EksinfError) as err:
        yamlio.load_input_docs(text.encode(), "bundle/app/unit.yaml")
    assert err.value.exit_code == CONTRACT
    assert err.value.message.startswith("bundle/app/unit.yaml:")
    assert "not valid YAML (found unhashable key)" in err.value.message


@pytest.mark.parametrize("text", TEXTS)
def test_a_source_with_an_unhashable_key_is_refused_naming_where(text: str):
    with pytest.raises(EksinfError) as err:
        yamlio.load_source(Path("values.yaml"), text)
    assert err.value.exit_code == CONTRACT
    assert "values.yaml:" in err.value.message and "found unhashable key" in err.value.message
