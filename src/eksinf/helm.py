"""The Helm engine: an adapter over the in-process Helm SDK (helm-python-sdk).

Everything else talks to `HelmEngine`, never to the SDK, because the SDK is alpha and needs a
private call to pin the Kubernetes version (see docs/stack-format.md, "Engine").
"""

from __future__ import annotations

import functools
import io
import json
import tarfile
from dataclasses import dataclass
from typing import Any, Protocol

from .errors import CONTRACT, EksinfError


@dataclass(frozen=True)
class RenderedChart:
    """What one chart render produced, before any post-processing."""

    manifests: dict[str, str]  # template path -> rendered YAML text (hooks included)
    crds: tuple[tuple[str, str], ...]  # (file path, YAML text) for crds/ of the chart and subcharts
    templates: tuple[tuple[str, str], ...]  # (template path, source) for the guard's text checks


@dataclass(frozen=True)
class RenderOptions:
    release: str
    namespace: str
    kube_version: str
    api_versions: tuple[str, ...] = ()


class HelmEngine(Protocol):
    name: str

    @property
    def version(self) -> str: ...

    def render(
        self, archive: bytes, values: dict[str, Any], opts: RenderOptions
    ) -> RenderedChart: ...


class SdkEngine:
    """Helm v4 through libhelm_c, in process: no subprocess per chart."""

    name = "helm-python-sdk"

    def __init__(self) -> None:
        import helm_python  # imported lazily: loading the native library costs ~80 ms

        self._helm = helm_python

    @functools.cached_property
    def version(self) -> str:
        from importlib.metadata import version

        from helm_python import _native

        return f"{version('helm-python-sdk')} (Helm {_native.helm_sdk_version()})"

    def render(self, archive: bytes, values: dict[str, Any], opts: RenderOptions) -> RenderedChart:
        from helm_python import _native
        from helm_python.errors import HelmError

        kube = opts.kube_version if opts.kube_version.startswith("v") else f"v{opts.kube_version}"
        options = {"name": opts.release, "namespace": opts.namespace, "kube_version": kube}
        if opts.api_versions:
            options["api_versions"] = list(opts.api_versions)
        try:
            with self._helm.Chart.load_archive(archive) as chart:
                # Chart.render() does not expose kube_version/api_versions; the native call does.
                raw = _native.call_string(
                    "helm_render", chart._raw(), json.dumps(values), json.dumps(options)
                )
                crds = tuple((c["filename"], c["data"]) for c in chart.crds)
        except HelmError as exc:
            raise EksinfError(
                f"helm could not render release {opts.release!r}: {exc}",
                hint="Check the chart values; the message names the template and line.",
                exit_code=CONTRACT,
            ) from exc
        # NOTES.txt is text for a human after `helm install`, never a manifest (as in helm template).
        manifests = {
            path: text for path, text in json.loads(raw).items() if not path.endswith("/NOTES.txt")
        }
        return RenderedChart(
            manifests=dict(sorted(manifests.items())), crds=crds, templates=chart_templates(archive)
        )


def chart_templates(archive: bytes) -> tuple[tuple[str, str], ...]:
    """Every template source of a chart archive and of its subcharts, for the guard.

    The SDK's `Chart.templates` lists the top chart's templates only, so a `lookup` in a
    subchart would go unseen. We read the archive itself: subcharts are either folders under
    `charts/` or archives there, nested to any depth. Paths match the engine's manifest keys
    (`<chart>/charts/<sub>/templates/x.yaml`).
    """
    out: list[tuple[str, str]] = []
    _collect_templates(archive, "", out)
    return tuple(sorted(out))


def _collect_templates(archive: bytes, prefix: str, out: list[tuple[str, str]]) -> None:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:*") as tar:
        for member in tar.getmembers():
            if not member.isfile():
                continue
            parts = member.name.split("/")
            if len(parts) >= 3 and parts[-2] == "charts" and parts[-1].endswith(".tgz"):
                nested = prefix + "/".join(parts[:-1]) + "/"
                _collect_templates(_read(tar, member), nested, out)
            elif _is_template(parts):
                text = _read(tar, member).decode("utf-8", errors="replace")
                out.append((prefix + member.name, text))


def _read(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    handle = tar.extractfile(member)
    return handle.read() if handle is not None else b""


def _is_template(parts: list[str]) -> bool:
    """A path `<chart>(/charts/<sub>)*/templates/...`."""
    index = 1
    while index + 1 < len(parts) and parts[index] == "charts":
        index += 2
    return index < len(parts) - 1 and parts[index] == "templates"


def default_engine() -> HelmEngine:
    return SdkEngine()
