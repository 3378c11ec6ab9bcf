"""`eksinf diff`: a copy of the stack in its own git repository, changed the way pull requests
change it, reviewed in all three formats.

The chart version bump is real: the mirror's karpenter archive is repacked as 1.14.1 (only
Chart.yaml's version differs), pinned with `charts lock` and rendered by the real Helm engine.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest
from chartkit import pin_charts
from conftest import MIRROR, REPO, STACK_DIRS, STACK_FILES

from eksinf.render import render_stack, write_configs
from eksinf.stack import load_stack

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV},
    ).stdout


def copy_stack(dest: Path) -> Path:
    import shutil

    dest.mkdir(parents=True)
    for name in STACK_FILES:
        shutil.copy2(REPO / name, dest / name)
    for name in STACK_DIRS:
        shutil.copytree(REPO / name, dest / name)
    (dest / ".gitignore").write_text(".eksinf/\n")
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "base")
    return dest


def repack_chart(src: Path, dest: Path, version: str) -> None:
    """The same chart under another version, packed reproducibly."""
    out = io.BytesIO()
    with tarfile.open(src) as tin, tarfile.open(fileobj=out, mode="w") as tout:
        for member in tin.getmembers():
            data = tin.extractfile(member).read() if member.isfile() else None
            if (
                member.isfile()
                and member.name.count("/") == 1
                and member.name.endswith("/Chart.yaml")
            ):
                text = data.decode()
                old = next(line for line in text.splitlines() if line.startswith("version:"))
                data = text.replace(old, f"version: {version}").encode()
                member.size = len(data)
            tout.addfile(member, io.BytesIO(data) if data is not None else None)
    dest.write_bytes(gzip.compress(out.getvalue(), mtime=0))


def edit(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text()
    assert text.count(old) >= count, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, count))


def delete_doc(path: Path, marker: str) -> None:
    """Remove the YAML document holding `marker` (documents are split on '---' lines)."""
    docs = path.read_text().split("\n---\n")
    kept = [d for d in docs if marker not in d]
    assert len(kept) == len(docs) - 1
    path.write_text("\n---\n".join(kept))


@pytest.fixture(scope="module")
def changed_stack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The five changes of the acceptance, rendered into configs/ and left uncommitted."""
    root = copy_stack(tmp_path_factory.mktemp("review") / "stack")
    # the upstream manifests are found beside the chart mirror, as in ../shared
    mirrors = tmp_path_factory.mktemp("mirrors")
    (mirrors / "manifests").symlink_to(MIRROR.parent / "manifests")
    mirror = mirrors / "charts"
    mirror.mkdir()
    for archive in MIRROR.glob("*.tgz"):
        (mirror / archive.name).symlink_to(archive)
    repack_chart(MIRROR / "karpenter-1.14.0.tgz", mirror / "karpenter-1.14.1.tgz", "1.14.1")
    edit(root / "versions.env", "KARPENTER_CHART_VERSION=1.14.0", "KARPENTER_CHART_VERSION=1.14.1")
    pin_charts(load_stack(root), mirror)
    edit(
        root / "render/karpenter-aws/controller-identity.yaml",
        '"ec2:DescribeSubnets"',
        '"ec2:DescribeSubnets",\n              "ec2:DescribeVolumes"',
    )
    edit(
        root / "render/inference-workloads/vllm.yaml",
        "vllm/vllm-openai:v0.11.0",
        "vllm/vllm-openai:v0.11.2",
    )
    pools = root / "render/karpenter/nodepools.yaml"
    text = pools.read_text()
    h200 = text.index("name: h200")
    pools.write_text(
        text[:h200] + text[h200:].replace('nvidia.com/gpu: "8"', 'nvidia.com/gpu: "16"', 1)
    )
    delete_doc(root / "render/aws-network/network.yaml", "name: inference-demo-private-c\n")
    write_configs(render_stack(load_stack(root), mirror))
    return root


@pytest.fixture(scope="module")
def report_json(changed_stack: Path) -> dict:
    import contextlib

    from eksinf.cli import run

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = run(["--stack", str(changed_stack), "diff", "main", "--format", "json"])
    assert code == 0
    return json.loads(buf.getvalue())


def find(report: dict, component: str, kind: str, name: str) -> dict:
    comp = next(c for c in report["components"] if c["component"] == component)
    return next(r for r in comp["resources"] if r["kind"] == kind and r["name"] == name)


# (component, kind, name, change, field path, risk class) for each acceptance change
EXPECTED = [
    ("karpenter", "Chart", "karpenter", "changed", "spec.version", "chart-bumped"),
    (
        "karpenter-aws",
        "Role",
        "inference-demo-karpenter-controller",
        "changed",
        "spec.inlinePolicies.karpenter-controller(json).Statement[Sid=ReadEC2State].Action",
        "iam-widened",
    ),
    (
        "inference-workloads",
        "Deployment",
        "vllm",
        "changed",
        "spec.template.spec.containers[name=vllm].image",
        "image-changed",
    ),
    (
        "karpenter",
        "NodePool",
        "h200",
        "changed",
        'spec.limits["nvidia.com/gpu"]',
        "capacity-changed",
    ),
    ("aws-network", "Subnet", "inference-demo-private-c", "removed", None, "infra-deleted"),
    ("aws-network", "Subnet", "inference-demo-private-c", "removed", None, "aws-resource-deleted"),
]


@pytest.mark.parametrize("component,kind,name,change,path,cls", EXPECTED)
def test_json_names_resource_path_and_class(report_json, component, kind, name, change, path, cls):
    res = find(report_json, component, kind, name)
    assert res["change"] == change
    if path is not None:
        assert path in [f["path"] for f in res["fields"]]
    assert cls in [r["class"] for r in res["risks"]]
    assert report_json["summary"]["risks"][cls] >= 1


def test_json_details(report_json):
    chart = find(report_json, "karpenter", "Chart", "karpenter")
    version = next(f for f in chart["fields"] if f["path"] == "spec.version")
    assert (version["old"], version["new"]) == ("1.14.0", "1.14.1")
    assert any("1.14.0 -> 1.14.1 (patch)" in r["reason"] for r in chart["risks"])
    role = find(report_json, "karpenter-aws", "Role", "inference-demo-karpenter-controller")
    assert any("ec2:DescribeVolumes" in r["reason"] for r in role["risks"])
    image = find(report_json, "inference-workloads", "Deployment", "vllm")["fields"]
    assert {"path": "spec.template.spec.containers[name=vllm].image", "change": "changed",
            "old": "vllm/vllm-openai:v0.11.0", "new": "vllm/vllm-openai:v0.11.2"} in image  # fmt: skip
    # the chart bump re-labels the controller's objects too, and that is all it does to them
    deploy = find(report_json, "karpenter", "Deployment", "karpenter")
    assert deploy["change"] == "changed"
    assert "chart-bumped" not in [r["class"] for r in deploy["risks"]]
    # the h200 pool: 8 -> 16 GPUs of p5e/p5en.48xlarge (8 GPUs, $35.0/h each in prices.json)
    pool = next(p for p in report_json["cost"]["nodePools"] if p["nodePool"] == "h200")
    assert pool["before"]["hourly"] == 35.0 and pool["after"]["hourly"] == 70.0
    assert pool["after"]["monthly"] == 70.0 * 730
    # nothing else changed: the untouched pools and components are absent
    names = {
        (c["component"], r["kind"], r["name"])
        for c in report_json["components"]
        for r in c["resources"]
    }
    assert ("karpenter", "NodePool", "quantized-gpu") not in names
    assert not any(c == "gpu-runtime" for c, _, _ in names)


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_text_and_markdown_name_resource_path_and_class(changed_stack, eksinf, fmt):
    res = eksinf("--stack", str(changed_stack), "diff", "main", "--format", fmt)
    assert res.code == 0, res.err
    out = res.out
    for _component, kind, name, change, path, cls in EXPECTED:
        line = next(
            (ln for ln in out.splitlines() if kind in ln and name in ln and change in ln), None
        )
        assert line is not None, f"{change} {kind} {name} missing from {fmt}"
        if path is not None:
            assert path in out
        assert cls in out
    if fmt == "markdown":
        assert out.startswith("<!-- eksinf-diff -->\n")
        assert "<details>" in out and "| `capacity-changed` |" in out
        assert "| `karpenter/h200` | $35.00 | $70.00 | $25,550.00 | $51,100.00 |" in out
        assert len(out) < 65_000


def test_fail_on_exits_1_when_a_listed_class_appears(changed_stack, eksinf):
    hit = eksinf(
        "--stack", str(changed_stack), "diff", "main", "--fail-on", "sync-wave-changed,iam-widened"
    )
    assert hit.code == 1
    assert "iam-widened" in hit.err and "sync-wave-changed" not in hit.err
    miss = eksinf("--stack", str(changed_stack), "diff", "main", "--fail-on", "sync-wave-changed")
    assert miss.code == 0
    bad = eksinf("--stack", str(changed_stack), "diff", "main", "--fail-on", "iam-wide")
    assert bad.code == 2 and "iam-widened" in bad.err


def test_unchanged_stack_prints_no_changes(tmp_path, eksinf):
    root = copy_stack(tmp_path / "stack")
    for fmt in ("text", "markdown"):
        res = eksinf("--stack", str(root), "diff", "--format", fmt)
        assert res.code == 0
        assert "no changes" in res.out
    res = eksinf("--stack", str(root), "diff", "--json")
    assert res.code == 0 and json.loads(res.out)["changed"] is False


def test_stale_base_is_rendered_in_a_worktree_that_is_removed(tmp_path, eksinf, chart_mirror):
    """BASE commits a render/ edit without re-rendering: its configs/ would show no change, so
    the diff renders BASE's inputs (in .eksinf/diff/, gone afterwards) and compares that."""
    root = copy_stack(tmp_path / "stack")
    vllm = root / "render/inference-workloads/vllm.yaml"
    edit(vllm, "replicas: 0", "replicas: 2")
    git(root, "commit", "-q", "-am", "stale: render/ changed, configs/ not re-rendered")
    edit(vllm, "replicas: 2", "replicas: 0")  # the working tree goes back to the original
    res = eksinf(
        "--stack", str(root), "diff", "HEAD", "--chart-mirror", str(chart_mirror), "--json"
    )
    assert res.code == 0, res.err
    report = json.loads(res.out)
    assert report["base"].endswith("(rendered)")
    assert any("stale" in n for n in report["notes"])
    vllm_change = find(report, "inference-workloads", "Deployment", "vllm")
    assert {"path": "spec.replicas", "change": "changed", "old": 2, "new": 0} in vllm_change[
        "fields"
    ]
    assert "capacity-changed" in [r["class"] for r in vllm_change["risks"]]
    assert not (root / ".eksinf" / "diff").exists()
    assert len(git(root, "worktree", "list").splitlines()) == 1


def test_unknown_base_is_a_usage_error_with_valid_json(tmp_path, eksinf):
    root = copy_stack(tmp_path / "stack")
    res = eksinf("--stack", str(root), "diff", "no-such-ref", "--json")
    assert res.code == 2
    error = json.loads(res.out)
    assert "no-such-ref" in error["error"]
    assert error["exit"] == 2 and error["changed"] is None  # the shape every command fails with
