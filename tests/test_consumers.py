"""Real consumers of the published artifacts.

- Flux: a Kustomization over an OCIRepository without a kustomization.yaml generates one listing
  every manifest and runs kustomize on it. Here `kubectl kustomize` (kustomize built into
  kubectl) runs over every unpacked release with such a generated kustomization.yaml.
- A second OCI client: skopeo (Debian package, installed by .ci/setup) reads every pushed
  artifact from the registry and from the OCI layout; its digests must be eksinf's.
- Argo CD's OCI acceptance rules, from Argo CD v3.1.0 (the first release with OCI sources):
  util/oci/client.go `Extract` requires exactly one layer (`len(ociManifest.Layers) != 1` ->
  "expected only a single oci layer") whose media type is in the repo-server's allowed list
  (cmd/argocd-repo-server/commands/argocd_repo_server.go, `--oci-layer-media-types` default:
  application/vnd.oci.image.layer.v1.tar, ...tar+gzip, application/vnd.cncf.helm.chart.content.v1.tar+gzip);
  a `tar+gzip` layer is extracted by util/io/files/tar.go `Untgz` under a size limit
  (`--oci-manifest-max-extracted-size`, default 1G), every name must stay inside the destination
  (`Inbound`: "illegal filepath in archive"), symlinks must resolve inside it, and only
  directories, symlinks and regular files are written (any other member is dropped silently).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

ARGO_LAYER_MEDIA_TYPES = (
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.cncf.helm.chart.content.v1.tar+gzip",
)
ARGO_MAX_EXTRACTED = 1 << 30  # "1G" parsed as a Kubernetes quantity


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: run `bash .ci/setup`")
    return path


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    """The README's main job on a copy of the stack: every plane's releases, in an OCI layout."""
    from conftest import REPO, STACK_DIRS, STACK_FILES

    from eksinf.cli import run

    root = tmp_path_factory.mktemp("sandbox")
    for name in STACK_FILES:
        shutil.copy2(REPO / name, root / name)
    for name in STACK_DIRS:
        shutil.copytree(REPO / name, root / name)
    assert run(["--stack", str(root), "sandbox", "up"]) == 0
    return root


def releases(root: Path) -> list[Path]:
    found = sorted(
        p for p in (root / ".eksinf/oci/space").iterdir() if (p / "index.json").is_file()
    )
    assert found, "sandbox up published no release"
    return found


def pull(eksinf, ref: str, out: Path) -> dict:
    result = eksinf("pull", ref, "--out", str(out), "--json")
    assert result.code == 0, result.err
    return json.loads(result.out)


def kustomize(folder: Path) -> subprocess.CompletedProcess:
    names = sorted(p.name for p in folder.iterdir() if p.suffix in (".yaml", ".yml"))
    (folder / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": names,
            }
        )
    )
    return subprocess.run(
        [tool("kubectl"), "kustomize", str(folder)], capture_output=True, text=True, check=False
    )


def test_kubectl_kustomize_builds_every_release(sandbox, eksinf, tmp_path):
    for layout in releases(sandbox):
        out = tmp_path / layout.name
        info = pull(eksinf, f"oci-layout:{layout}", out)
        assert info["kind"] == "release"
        shipped = sum(
            1 for name in info["files"] for d in yaml.safe_load_all((out / name).read_text()) if d
        )
        built = kustomize(out)
        assert built.returncode == 0, f"{layout.name}: {built.stderr}"
        assert len([d for d in yaml.safe_load_all(built.stdout) if d]) == shipped, layout.name


def test_kustomize_refuses_what_flux_refuses(sandbox, eksinf, tmp_path):
    """The check has teeth: a CRD shipped twice (as ACK's charts did) fails the build."""
    out = tmp_path / "ack"
    pull(eksinf, f"oci-layout:{sandbox / '.eksinf/oci/space/ack-controllers-sandbox'}", out)
    (out / "again.yaml").write_text((out / "iam-crds.yaml").read_text())
    built = kustomize(out)
    assert built.returncode != 0
    assert "already registered id" in built.stderr


def test_skopeo_reads_every_artifact_from_the_registry_and_the_layout(
    sandbox, eksinf, registry, tmp_path
):
    skopeo = tool("skopeo")
    base = f"{registry}/consumers/eks-inference"
    pushed = eksinf("push", "--registry", base, "--json", cwd=sandbox)
    assert pushed.code == 0, pushed.err
    layout = tmp_path / "layout"
    in_layout = eksinf("push", "--registry", f"oci-layout:{layout}", "--json", cwd=sandbox)
    assert in_layout.code == 0, in_layout.err
    refs = []
    for entry in json.loads(pushed.out)["pushed"]:
        ref = f"{entry['ref']}:{entry['version']}"
        refs.append(("registry", ["--tls-verify=false", f"docker://{ref}"], entry))
    for entry in json.loads(in_layout.out)["pushed"]:
        refs.append(("layout", [f"oci:{layout / entry['component']}:{entry['version']}"], entry))
    for space in releases(sandbox):  # the hub's releases: the layout, at `latest`
        index = json.loads((space / "index.json").read_text())
        [latest] = [
            m
            for m in index["manifests"]
            if m["annotations"]["org.opencontainers.image.ref.name"] == "latest"
        ]
        manifest = json.loads(
            (space / "blobs/sha256" / latest["digest"].split(":")[1]).read_bytes()
        )
        entry = {"manifestDigest": latest["digest"], "layerDigest": manifest["layers"][0]["digest"]}
        refs.append(("release", [f"oci:{space}:latest"], entry))
    assert len(refs) >= 3 * 7

    for index, (where, args, entry) in enumerate(refs):
        raw = subprocess.run([skopeo, "inspect", "--raw", *args], capture_output=True, check=False)
        assert raw.returncode == 0, f"{where} {args}: {raw.stderr.decode()}"
        assert sha256(raw.stdout) == entry["manifestDigest"], f"{where} {args}"

        dest = tmp_path / f"copy{index}"
        copy_args = [a.replace("--tls-verify", "--src-tls-verify") for a in args]
        copied = subprocess.run(
            [skopeo, "copy", *copy_args, f"dir:{dest}"], capture_output=True, check=False
        )
        assert copied.returncode == 0, f"{where} {args}: {copied.stderr.decode()}"
        assert sha256((dest / "manifest.json").read_bytes()) == entry["manifestDigest"]
        layer_hex = entry["layerDigest"].split(":")[1]
        assert sha256((dest / layer_hex).read_bytes()) == entry["layerDigest"]


def _argo_accepts(manifest: dict, layer: bytes) -> list[str]:
    """Argo CD v3.1.0's checks on an OCI source (see the module docstring); [] = accepted."""
    problems = []
    layers = manifest.get("layers") or []
    if len(layers) != 1:
        return [f"expected only a single oci layer, got {len(layers)}"]
    media = layers[0]["mediaType"]
    if media not in ARGO_LAYER_MEDIA_TYPES:
        problems.append(f"oci layer media type {media} is not in the list of allowed media types")
    if media.endswith("tar+gzip"):
        layer = gzip.decompress(layer)
    if len(layer) > ARGO_MAX_EXTRACTED:
        problems.append("layer larger than --oci-manifest-max-extracted-size")
    dest = Path("/extract")
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        for member in tar.getmembers():
            target = (
                (dest / member.name).resolve()
                if not Path(member.name).is_absolute()
                else Path(member.name)
            )
            if not str(target).startswith(f"{dest}/"):
                problems.append(f"illegal filepath in archive: {member.name}")
            if not (member.isreg() or member.isdir()):
                problems.append(f"{member.name}: type {member.type!r} is not extracted by Argo CD")
    return problems


def test_every_artifact_meets_argo_cds_oci_rules(sandbox, eksinf, tmp_path):
    layout = tmp_path / "bases"
    assert eksinf("push", "--registry", f"oci-layout:{layout}", cwd=sandbox).code == 0
    stores = [*sorted(p for p in layout.iterdir() if p.is_dir()), *releases(sandbox)]
    checked = 0
    for store in stores:
        index = json.loads((store / "index.json").read_text())
        for desc in index["manifests"]:
            manifest = json.loads(
                (store / "blobs/sha256" / desc["digest"].split(":")[1]).read_bytes()
            )
            layer = (
                store / "blobs/sha256" / manifest["layers"][0]["digest"].split(":")[1]
            ).read_bytes()
            assert _argo_accepts(manifest, layer) == [], store.name
            checked += 1
    assert checked >= 14

    # and the rules bite: two layers, a foreign media type, an escaping name
    assert _argo_accepts({"layers": [{}, {}]}, b"") == ["expected only a single oci layer, got 2"]
    bad = io.BytesIO()
    with tarfile.open(fileobj=bad, mode="w") as tar:
        info = tarfile.TarInfo("../escape.yaml")
        tar.addfile(info, io.BytesIO(b""))
    found = _argo_accepts({"layers": [{"mediaType": "application/zip"}]}, bad.getvalue())
    assert found == [
        "oci layer media type application/zip is not in the list of allowed media types",
        "illegal filepath in archive: ../escape.yaml",
    ]
