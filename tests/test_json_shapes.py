"""Every read command's --json is one JSON object, lists under a key, in one key style
(camelCase), on success and on failure (docs/safety.md)."""

from __future__ import annotations

import json
import re

import pytest

CAMEL = re.compile(r"^[a-z][a-zA-Z0-9]*$")
# Keys whose values are data eksinf passes on, not its own vocabulary: labels and annotations,
# profile values, per-name maps (keyed by a unit, component, file or Kubernetes field).
DATA_KEYS = {
    "labels",
    "annotations",
    "values",
    "profile",
    "inputs",
    "files",
    "charts",
    "byName",
    "units",
    "components",
    "digests",
    "fields",
    "policy",  # an IAM policy document: AWS's own key style
}


def badly_named(value: object, where: str = "") -> list[str]:
    bad = []
    if isinstance(value, dict):
        for key, inner in value.items():
            if not CAMEL.match(str(key)):
                bad.append(f"{where}.{key}")
            if key not in DATA_KEYS or isinstance(inner, list):
                bad += badly_named(inner, f"{where}.{key}")
    elif isinstance(value, list):
        for item in value:
            bad += badly_named(item, f"{where}[]")
    return bad


COMMANDS = [
    ("version",),
    ("components",),
    ("verify",),
    ("validate",),
    ("lint",),
    ("lint", "--list"),
    ("links", "list"),
    ("charts", "list"),
    ("diff", "--format", "json", "--list-classes"),
    ("enroll", "cluster", "--list-checks"),
    ("creds", "show-policy"),
    ("tags", "oci-layout:.eksinf/oci/space/karpenter-sandbox"),
    ("hub", "spaces"),
    ("hub", "units", "--space", "karpenter-sandbox"),
    ("hub", "show", "karpenter-sandbox", "karpenter-nodepools"),
    ("hub", "diff", "karpenter-sandbox", "karpenter-nodepools", "--upstream"),
    ("hub", "history", "karpenter-sandbox", "karpenter-nodepools"),
    ("release", "list", "karpenter-sandbox"),
    ("target", "list"),
    ("link-profile", "--list"),
    ("sandbox", "down"),
    ("sandbox", "up"),
    ("install",),
    ("hub", "spaces", "--hub", "nowhere"),  # a failure: still one object
]


@pytest.fixture(scope="module")
def up_stack(tmp_path_factory):
    import shutil

    from conftest import REPO, STACK_DIRS, STACK_FILES

    from eksinf.cli import run

    dest = tmp_path_factory.mktemp("json") / "stack"
    dest.mkdir()
    for name in STACK_FILES:
        shutil.copy2(REPO / name, dest / name)
    for name in STACK_DIRS:
        shutil.copytree(REPO / name, dest / name)
    assert run(["--stack", str(dest), "sandbox", "up"]) == 0
    return dest


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_json_output_is_one_camel_case_object(up_stack, eksinf, command):
    result = eksinf(*command, "--json", cwd=up_stack)
    body = json.loads(result.out)
    assert isinstance(body, dict), result.out[:200]
    assert sorted(set(badly_named(body))) == [], (result.code, result.err)
