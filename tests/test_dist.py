"""core/dist.py: a distribution's release and version read beside its package, as
importlib.metadata reads them."""

from __future__ import annotations

from importlib.metadata import version

import pytest

from eksinf.core import dist


@pytest.mark.parametrize(
    ("package", "distribution"),
    [("helm_python", "helm-python-sdk"), ("yaml", "PyYAML"), ("typer", "typer")],
)
def test_version_is_importlib_metadatas(package, distribution):
    assert dist.version(dist.package_dirs(package), distribution) == version(distribution)


def test_version_is_the_header_field_only(tmp_path):
    package = tmp_path / "site" / "thing"
    package.mkdir(parents=True)
    info = tmp_path / "site" / "some_thing-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: some-thing\nVersion: 1.0rc2\n\nVersion: 9.9 in the body\n"
    )
    assert dist.version([str(package)], "some-thing") == "1.0rc2"
    assert dist.release([str(package)], "some-thing") == "some_thing-1.0.dist-info"


def test_without_a_metadata_folder_importlib_metadata_answers(tmp_path):
    assert dist.version([str(tmp_path / "nowhere")], "PyYAML") == version("PyYAML")
