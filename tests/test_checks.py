"""The check kernel (model/checks.py): a rule's findings carry its name, severity and anchor
without the rule spelling them, and a family's docs table is rendered from its rules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from eksinf.model import checks
from eksinf.model.checks import ADVISORY, Finding, rule


@rule("two-things", family="demo", severity="required", anchor="docs/demo.md#two")
def two_things(ctx: int) -> Iterator[Finding]:
    """Counts up to two.

    Only the first paragraph is the summary."""
    if ctx > 2:
        yield Finding(f"{ctx} is more than two", element="the count", fix="count less")
    yield Finding("counted", status="skipped")


def test_a_rule_stamps_its_name_severity_and_anchor_on_every_finding() -> None:
    failed, skipped = two_things.run(3)
    assert (failed.name, failed.severity, failed.anchor) == (
        "two-things",
        "required",
        "docs/demo.md#two",
    )
    assert failed.blocks and failed.detail == "3 is more than two"
    # a finding that did not apply never blocks, whatever the rule's severity
    assert (skipped.name, skipped.severity, skipped.blocks) == ("two-things", ADVISORY, False)
    assert two_things.summary == "Counts up to two."
    assert [f.name for f in checks.run((two_things, two_things), 1)] == ["two-things"] * 2


def test_a_table_names_each_rule_once() -> None:
    with pytest.raises(AssertionError, match="listed twice"):
        checks.check_table((two_things, two_things))


def test_a_family_table_renders_as_markdown_with_pipes_escaped() -> None:
    columns = (("rule", lambda r: f"`{r.name}`"), ("what", lambda r: r.summary + " a|b"))
    assert checks.markdown((two_things,), columns) == (
        "| rule | what |\n|---|---|\n| `two-things` | Counts up to two. a\\|b |\n"
    )
    doc = "head\n<!-- b -->\nold\n<!-- e -->\ntail\n"
    new = checks.replace_generated(doc, "new\n", "<!-- b -->\n", "<!-- e -->")
    assert new == "head\n<!-- b -->\nnew\n<!-- e -->\ntail\n"
    assert checks.generated(new, "<!-- b -->\n", "<!-- e -->") == "new\n"


FAMILIES = {
    # family: (the module holding its one table, the table's name, the modules its rules live in)
    "contract": (
        "eksinf.aws.contract.rules",
        "RULES",
        (
            "eksinf.aws.contract.rules_access",
            "eksinf.aws.contract.rules_identity",
            "eksinf.aws.contract.rules_nodes",
            "eksinf.aws.contract.hyperpod_rules",
            "eksinf.aws.contract.hyperpod_role_rules",
        ),
    ),
    "lint": (
        "eksinf.lint.rules",
        "CHECKS",
        tuple(
            f"eksinf.lint.{m}"
            for m in ("addons", "identity", "lifecycle", "naming", "network", "scheduling")
        ),
    ),
    "guard": ("eksinf.build.hazards", "HAZARDS", ("eksinf.build.hazards",)),
    "review": ("eksinf.review.risks", "TABLE", ("eksinf.review.risks",)),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_rule_a_family_writes_is_in_its_one_table(family: str) -> None:
    """A rule written but left out of its family's table would never run: each module's rules
    are all listed, once, and the table holds only that family's rules."""
    import importlib

    table_module, table_name, modules = FAMILIES[family]
    table = getattr(importlib.import_module(table_module), table_name)
    written = {
        id(value): f"{name}.{attr}"
        for name in modules
        for attr, value in vars(importlib.import_module(name)).items()
        if isinstance(value, checks.Rule) and value.family == family
    }
    assert set(written) <= {id(r) for r in table}, sorted(
        label for key, label in written.items() if key not in {id(r) for r in table}
    )
    assert {r.family for r in table} == {family}
    checks.check_table(table)
