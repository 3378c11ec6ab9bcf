"""Every check family's docs table is generated from its one table of rules, byte for byte:
lint's checks (docs/linking.md), the guard's hazards (docs/flattening.md) and review's risk
classes (docs/review.md). The contract's tables are tested in test_contract_rules.py and
test_hyperpod_contract.py. Regenerate all three with `.venv/bin/python tests/test_check_docs.py`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from eksinf.model import checks

DOCS = Path(__file__).resolve().parents[1] / "docs"
BEGIN, END = "<!-- checks:begin (generated) -->\n", "<!-- checks:end -->"


def _lint() -> str:
    from eksinf import lint

    return lint.markdown()


def _guard() -> str:
    from eksinf.build import hazards

    return hazards.markdown()


def _review() -> str:
    from eksinf.review import risks

    return risks.markdown()


FAMILIES: dict[str, Callable[[], str]] = {
    "linking.md": _lint,
    "flattening.md": _guard,
    "review.md": _review,
}


@pytest.mark.parametrize("page", sorted(FAMILIES))
def test_the_family_table_in_its_docs_page_is_generated(page: str) -> None:
    doc = (DOCS / page).read_text(encoding="utf-8")
    assert BEGIN in doc and END in doc, page
    assert checks.generated(doc, BEGIN, END) == FAMILIES[page](), (
        f"docs/{page} is stale: run .venv/bin/python tests/test_check_docs.py"
    )


def test_every_lint_check_has_a_summary_and_one_row_per_name() -> None:
    from eksinf import lint

    names = [row["name"] for row in lint.table()]
    assert len(names) == len(set(names))
    assert all(row["summary"] for row in lint.table())
    assert "storage" in names and "taints" in names  # one pass, two rows


def test_every_hazard_says_what_goes_wrong_and_what_to_do() -> None:
    from eksinf.build.hazards import HAZARDS

    for rule in HAZARDS:
        assert rule.why and rule.fix and rule.summary and rule.domain, rule.name


if __name__ == "__main__":
    for page, render in FAMILIES.items():
        path = DOCS / page
        text = path.read_text(encoding="utf-8")
        path.write_text(checks.replace_generated(text, render(), BEGIN, END), encoding="utf-8")
