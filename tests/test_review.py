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

from eksinf.build.render import render_stack
from eksinf.build.write import write_configs
from eksinf.model.stack import load_stack

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
    """The acceptance changes (issues 14 and 26), rendered into configs/ and left uncommitted:
    a chart bump, ec2:DeleteVolume added to Karpenter's statement that covers only instance and
    launch-template ARNs, vLLM moved to v0.11.2 with 2 replicas of 2 GPUs, the quantized-gpu
    NodePool's GPU limit raised from 4 to 16 with 12xlarge allowed, the private-c subnet and the
    node Role deleted."""
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
        '"Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"]',
        '"Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate", "ec2:DeleteVolume"]',
    )
    vllm = root / "render/inference-workloads/vllm.yaml"
    edit(vllm, "vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:v0.11.2")
    edit(vllm, "replicas: 0", "replicas: 2")
    edit(vllm, "nvidia.com/gpu: 1", "nvidia.com/gpu: 2")
    pools = root / "render/karpenter/nodepools.yaml"
    edit(pools, 'nvidia.com/gpu: "4"', 'nvidia.com/gpu: "16"')
    edit(pools, "values: [xlarge, 2xlarge]", "values: [xlarge, 2xlarge, 12xlarge]")
    delete_doc(root / "render/aws-network/network.yaml", "name: inference-demo-private-c\n")
    delete_doc(root / "render/eks-cluster/iam-roles.yaml", "name: inference-demo-node-role\n")
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
IAM_STATEMENT = "spec.inlinePolicies.karpenter-controller(json).Statement[Sid=DeleteOwnResources]"
EXPECTED = [
    ("karpenter", "Chart", "karpenter", "changed", "spec.version", "chart-bumped"),
    (
        "karpenter-aws",
        "Role",
        "inference-demo-karpenter-controller",
        "changed",
        f"{IAM_STATEMENT}.Action",
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
    ("inference-workloads", "Deployment", "vllm", "changed", "spec.replicas", "capacity-changed"),
    (
        "karpenter",
        "NodePool",
        "quantized-gpu",
        "changed",
        'spec.limits["nvidia.com/gpu"]',
        "capacity-changed",
    ),
    ("aws-network", "Subnet", "inference-demo-private-c", "removed", None, "infra-deleted"),
    ("aws-network", "Subnet", "inference-demo-private-c", "removed", None, "aws-resource-deleted"),
    ("eks-cluster", "Role", "inference-demo-node-role", "removed", None, "aws-resource-deleted"),
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
    assert any("ec2:DeleteVolume" in r["reason"] for r in role["risks"])
    image = find(report_json, "inference-workloads", "Deployment", "vllm")["fields"]
    assert {"path": "spec.template.spec.containers[name=vllm].image", "change": "changed",
            "old": "vllm/vllm-openai:v0.11.0", "new": "vllm/vllm-openai:v0.11.2"} in image  # fmt: skip
    # the chart bump re-labels the controller's objects too, and that is all it does to them
    deploy = find(report_json, "karpenter", "Deployment", "karpenter")
    assert deploy["change"] == "changed"
    assert "chart-bumped" not in [r["class"] for r in deploy["risks"]]
    # nothing else changed: the untouched pools and components are absent
    names = {
        (c["component"], r["kind"], r["name"])
        for c in report_json["components"]
        for r in c["resources"]
    }
    assert ("karpenter", "NodePool", "h200") not in names
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
        assert "| `karpenter/quantized-gpu` | $8.97 | $41.97 | $6,546.87 | $30,638.51 |" in out
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


# ---- severity order, IAM in context, GPU totals, prices, colour ----------------------


def test_aws_deletion_comes_first_in_all_three_formats(changed_stack, report_json, eksinf):
    """Removing an ACK Role (and a Subnet) puts aws-resource-deleted first, and every finding
    after it in severity order, in JSON, text and Markdown alike."""
    findings = report_json["findings"]
    order = [c["id"] for c in report_json["classes"]]
    assert [f["class"] for f in findings[:2]] == ["aws-resource-deleted"] * 2
    assert [order.index(f["class"]) for f in findings] == sorted(
        order.index(f["class"]) for f in findings
    )
    assert findings[0]["marker"] == "⛔" and "Role" in " ".join(f["resource"] for f in findings[:2])
    text = eksinf("--stack", str(changed_stack), "diff", "main").out
    listed = text.split("findings, most severe first:\n", 1)[1].splitlines()
    assert listed[0].startswith("  ⛔ aws-resource-deleted: ")
    classes = [
        ln.split()[1].rstrip(":")
        for ln in listed
        if ln.startswith("  ") and not ln.startswith("   ") and ln.strip()
    ]
    assert classes[:3] == ["aws-resource-deleted", "aws-resource-deleted", "iam-widened"]
    md = eksinf("--stack", str(changed_stack), "diff", "main", "--format", "markdown").out
    top = md.index("#### ⛔ Highest risk: `aws-resource-deleted`")
    assert top < md.index("<details>")  # shown open, before anything collapsed
    first_rest = md.index("more finding(s), most severe first: 🔓 iam-widened")
    assert top < first_rest < md.index("<summary><b>")
    assert "inference-demo-node-role" in md[top:first_rest]


def test_iam_finding_shows_resource_condition_and_no_op(report_json, changed_stack, eksinf):
    (iam,) = [f for f in report_json["findings"] if f["class"] == "iam-widened"]
    assert iam["path"] == IAM_STATEMENT
    assert "ec2:DeleteVolume" in iam["reason"] and "no-op" in iam["reason"]
    ctx = iam["context"]
    assert ctx["Resource"] == '["arn:aws:ec2:*:*:instance/*", "arn:aws:ec2:*:*:launch-template/*"]'
    assert ctx["Condition"] == '{"Null": {"aws:ResourceTag/karpenter.sh/nodepool": "false"}}'
    assert ctx["takes effect"].startswith("no: a no-op, ec2:DeleteVolume acts only on arn:")
    assert "volume/" in ctx["takes effect"] and "parliament" in ctx["takes effect"]
    text = eksinf("--stack", str(changed_stack), "diff", "main").out
    assert f"    Resource: {ctx['Resource']}" in text and "    takes effect: no: a no-op" in text
    md = eksinf("--stack", str(changed_stack), "diff", "main", "--format", "markdown").out
    assert f"  - Resource: `{ctx['Resource']}`" in md and "  - takes effect: `no: a no-op" in md


def test_gpu_totals_and_monthly_delta(report_json, changed_stack, eksinf):
    gpus = report_json["gpus"]
    # vLLM: 0 replicas -> 2 replicas x 2 GPUs; pools: quantized-gpu 4 -> 16, h200 8 (unchanged)
    assert gpus["requested"] == {"before": 0, "after": 4}
    assert gpus["nodePoolMaximum"] == {"before": 12, "after": 24}
    assert {"resource": "apps/v1 Deployment inference/vllm", "before": 0, "after": 4} in gpus[
        "workloads"
    ]
    cost = report_json["cost"]
    (pool,) = cost["nodePools"]
    # us-west-2 snapshot: 4 x g6e.2xlarge's L40S at $2.24208; 16 x g6e.12xlarge's at $10.49264/4
    assert pool["before"]["hourly"] == pytest.approx(4 * 2.24208, abs=1e-4)
    assert pool["after"]["hourly"] == pytest.approx(16 * 10.49264 / 4, abs=1e-4)
    assert cost["monthlyMaximumDelta"] == pytest.approx(
        (16 * 10.49264 / 4 - 4 * 2.24208) * 730, abs=0.01
    )
    assert cost["priceSource"].startswith(
        "snapshot of https://aws.amazon.com/ec2/pricing/on-demand/"
    )
    text = eksinf("--stack", str(changed_stack), "diff", "main").out
    assert "GPUs requested by workloads: 0 -> 4" in text
    assert "GPU NodePools' maximum: 12 -> 24" in text
    assert "monthly maximum delta: +$24,091.64" in text


def test_eu_west_1_is_unknown_by_name_from_the_snapshot_and_known_live(
    changed_stack, eksinf, aws_env, monkeypatch
):
    """The snapshot does not price eu-west-1: every cell names the types it lacks, never $0.
    With credentials the Price List prices them. moto has no pricing service, so only
    pricing:GetProducts is stubbed, with answers in botocore's shape carrying stand-in rates
    (not AWS's eu-west-1 figures)."""
    from aws_stubs import PriceListFake

    off = eksinf(
        "--stack", str(changed_stack), "diff", "main", "--json", "--region", "eu-west-1",
        "--prices", "snapshot",
    )  # fmt: skip
    (pool,) = json.loads(off.out)["cost"]["nodePools"]
    assert pool["after"]["hourly"] is None and "g6e.12xlarge" in pool["after"]["unpriced"]
    text = eksinf(
        "--stack",
        str(changed_stack),
        "diff",
        "main",
        "--region",
        "eu-west-1",
        "--prices",
        "snapshot",
    ).out
    assert "unknown (no price: g5.xlarge, " in text and "$0.00" not in text
    assert "monthly maximum delta: unknown (" in text

    rates = {}
    for family, base in (("g5", 1.0), ("g6", 0.9), ("g6e", 2.0)):
        for size, factor in (("xlarge", 1), ("2xlarge", 1.25), ("12xlarge", 5)):
            rates[(f"{family}.{size}", "eu-west-1")] = f"{base * factor:.4f}"
    fake = PriceListFake(rates=rates).install(monkeypatch)
    monkeypatch.setenv("EKSINF_CACHE_DIR", str(changed_stack.parent / "cache"))
    live = eksinf("--stack", str(changed_stack), "diff", "main", "--json", "--region", "eu-west-1")
    assert live.code == 0, live.err
    report = json.loads(live.out)
    (pool,) = report["cost"]["nodePools"]
    assert pool["before"]["hourly"] == pytest.approx(4 * 2.5)  # g6e.2xlarge: 1 GPU at 2.5
    assert pool["after"]["hourly"] == pytest.approx(16 * 10.0 / 4)  # g6e.12xlarge: 4 at 10.0
    assert report["cost"]["priceSource"].startswith("AWS Price List API (pricing:GetProducts)")
    assert {c["regionCode"] for c in fake.calls} == {"eu-west-1"}


def test_diff_lines_and_colour(changed_stack, eksinf, monkeypatch):
    md = eksinf("--stack", str(changed_stack), "diff", "main", "--format", "markdown").out
    assert "```diff\n- spec.replicas: 0\n+ spec.replicas: 2\n" in md
    assert "\x1b[" not in md
    plain = eksinf("--stack", str(changed_stack), "diff", "main").out
    assert "\x1b[" not in plain  # not a terminal: no colour
    assert "    - spec.replicas: 0\n    + spec.replicas: 2\n" in plain
    forced = eksinf("--stack", str(changed_stack), "diff", "main", "--color").out
    assert "\x1b[31m    - spec.replicas: 0\x1b[0m" in forced
    assert "\x1b[32m    + spec.replicas: 2\x1b[0m" in forced
    assert "\x1b[31m\x1b[1m  ⛔ aws-resource-deleted" in forced
    # stripped of colour, the text is the same facts
    import re

    assert re.sub(r"\x1b\[[0-9;]*m", "", forced) == plain


def test_colour_follows_the_terminal_and_no_color(monkeypatch):
    import sys

    from eksinf.cli.review import _colour

    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert _colour(None) is True
    monkeypatch.setenv("NO_COLOR", "1")
    assert _colour(None) is False and _colour(True) is True
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False, raising=False)
    monkeypatch.delenv("NO_COLOR")
    assert _colour(None) is False and _colour(False) is False
