"""The pull-request workflow (.github/workflows/review.yml), short of GitHub itself: its diff step
runs here, on a test repository with a change, and the comment body it would post is checked.
The posting step (actions/github-script) cannot run here; the test checks that it looks for the
marker eksinf writes, so an update finds the comment the first run created.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import yaml
from conftest import MIRROR, REPO
from test_review import copy_stack, edit

from eksinf.review.report import MARKDOWN_LIMIT, MARKER, to_markdown

WORKFLOW = REPO / ".github" / "workflows" / "review.yml"


def _workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def test_diff_step_produces_the_sticky_comment_body(tmp_path: Path):
    root = copy_stack(tmp_path / "stack")
    (root / ".venv").symlink_to(REPO / ".venv")  # the step calls .venv/bin/eksinf
    edit(root / "render/inference-workloads/vllm.yaml", "replicas: 0", "replicas: 1")
    job = _workflow()["jobs"]["diff"]
    step = next(s for s in job["steps"] if s.get("name") == "diff")
    env = {
        **os.environ,
        "BASE": "main",  # the workflow's origin/<base_ref>; this repository has no remote
        "DETAILS": "https://example.invalid/run/1",
        "EKSINF_CHART_MIRROR": str(MIRROR),  # GitHub fetches charts upstream; here, no network
    }
    done = subprocess.run(
        ["bash", "-e", "-c", step["run"]], cwd=root, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    body = (root / "comment.md").read_text()
    assert body.startswith(MARKER + "\n")
    assert len(body) < MARKDOWN_LIMIT
    assert "Deployment inference/vllm" in body and "capacity-changed" in body
    assert "```diff\n- spec.replicas: 0\n+ spec.replicas: 1\n```" in body  # GitHub colours it
    report = json.loads((root / "eksinf-diff.json").read_text())
    assert report["changed"] is True
    assert report["notes"], "the working tree's configs/ was stale and rendered: the note says so"
    # the posting script finds its comment by the same marker and refuses a body without it
    post = next(s for s in job["steps"] if "github-script" in s.get("uses", ""))
    assert f"const marker = '{MARKER}';" in post["with"]["script"]
    assert "updateComment" in post["with"]["script"]
    assert job["steps"][0]["with"]["fetch-depth"] == 0
    assert _workflow()["permissions"]["pull-requests"] == "write"


def test_markdown_is_truncated_with_a_pointer_to_the_json():
    """A review too long for one comment keeps its summary and says where the rest is."""
    from eksinf.review.report import review
    from eksinf.review.snapshot import snapshot

    base = {
        f"configs/c{i}/u.yaml": f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: m{i}}}\ndata: {{k: a}}\n"
        for i in range(400)
    }
    head = {p: t.replace("k: a", "k: " + "b" * 300) for p, t in base.items()}
    rev = review(snapshot(base), snapshot(head), "base", "head")
    full = to_markdown(rev, limit=10**9)
    assert len(full) > MARKDOWN_LIMIT
    body = to_markdown(rev, details="https://example.invalid/run/1")
    assert len(body) < MARKDOWN_LIMIT
    assert body.startswith(MARKER)
    assert "400 changed in 400 component(s)" in body
    assert "**Truncated:**" in body and "https://example.invalid/run/1" in body
    left = int(body.split("**Truncated:** ")[1].split(" ")[0])
    assert body.count("<details>") + left == 400  # one resource per component here
    assert body.count("<details>") == body.count("</details>")


def test_one_large_component_is_cut_between_resources():
    """A chart bump touching hundreds of resources of one component still shows the first ones."""
    unit = "".join(
        f"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: m{i}}}\ndata: {{k{i}: a}}\n"
        for i in range(600)
    )
    base = {"configs/big/u.yaml": unit}
    head = {"configs/big/u.yaml": unit.replace(": a}", ": " + "b" * 200 + "}")}
    from eksinf.review.report import review
    from eksinf.review.snapshot import snapshot

    body = to_markdown(review(snapshot(base), snapshot(head), "base", "head"))
    assert len(body) < MARKDOWN_LIMIT
    assert body.count("<details>") == body.count("</details>") == 1
    shown = body.count("**changed** `v1 ConfigMap")
    left = int(body.split("**Truncated:** ")[1].split(" ")[0])
    assert shown > 100 and shown + left == 600
