"""Printed fix commands are shell-quoted: a value from input (a folder, a
name, an ARN) that holds a space or a quote reaches the printed command as one word, so pasting
the command runs exactly what it names."""

from __future__ import annotations

import shlex

import pytest

from eksinf.errors import FAILURE, shell_command


@pytest.mark.parametrize(
    "value",
    ["plain", "two words", "it's", 'say "hi"', "$(rm -rf ~)", "a;b", "tab\there", "", "new\nline"],
)
def test_each_word_comes_back_as_one_word(value):
    printed = shell_command("eksinf", "hub", "units", "--space", value)
    assert shlex.split(printed) == ["eksinf", "hub", "units", "--space", value]


def test_plain_words_stay_as_written():
    assert shell_command("aws", "eks", "create-addon", "--cluster-name", "demo-1") == (
        "aws eks create-addon --cluster-name demo-1"
    )


def test_a_hint_names_a_layout_with_a_space_and_a_quote_as_one_word(eksinf, tmp_path):
    layout = tmp_path / "team's layouts" / "x y"
    result = eksinf("pull", f"oci-layout:{layout}", "--out", str(tmp_path / "out"))
    assert result.code == FAILURE and "Traceback" not in result.err
    (hint,) = [line for line in result.err.splitlines() if line.startswith("  hint: ")]
    command = hint.split("`")[1]
    assert shlex.split(command) == ["eksinf", "tags", f"oci-layout:{layout}"]
    assert not (tmp_path / "out").exists()
