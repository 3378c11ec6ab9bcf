"""The Go original's command line (confighub/eks-inference, `cub eksinf`), answered by eksinf.

Scripts and fingers written for the original keep working: every flag of every command the
original had is one row of `FLAGS`, saying what eksinf does with it. A row whose eksinf option
the invoked command has is rewritten to it (`--profile` becomes `--aws-profile`, `creds
--cluster X` the kubeconfig `cub cluster up --name X` wrote, and the original's persistent flags
may stand before the command, as cobra allowed). Otherwise the row either says the flag has no
effect here, as it had none in the original (the run goes on, with a note on stderr), or refuses
with exit 2 and eksinf's equivalent: never click's bare "No such option".

`translate` runs before the argument layer parses; commands the original did not have are left
alone. docs/migrating.md carries the same table for readers; tests/test_original_cli.py runs
every row through the CLI.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ENVIRONMENT, USAGE, EksinfError
from ..model.names import cub_cluster_kubeconfig
from .common import progress

# Every command path of the original (cobra's `cub eksinf ...`).
COMMANDS = (
    "components",
    "version",
    "install",
    "deploy",
    "link-profile",
    "enroll cluster",
    "enroll remove",
    "sandbox up",
    "sandbox down",
    "creds status",
    "creds use-existing",
    "creds refresh",
    "creds create-user",
    "creds delete-user",
    "creds show-policy",
    "status",
    "teardown",
)
EVERY = ("",)  # a persistent flag of the root: every command took it


def _cub_cluster(name: str) -> str:
    """`creds --cluster NAME`: the kubeconfig `cub cluster up --name NAME` wrote, which must be
    there (the original required the named cluster to answer)."""
    path = cub_cluster_kubeconfig(name)
    if not path.is_file():
        raise EksinfError(
            f"--cluster {name}: no kubeconfig at {path}",
            hint=f"Start the cluster with `cub cluster up --name {name}`, or pass --kubeconfig.",
            exit_code=ENVIRONMENT,
        )
    return str(path)


@dataclass(frozen=True)
class Flag:
    """One flag of the original. `commands` are the paths it was given on (a prefix such as
    `creds` covers the group's commands). `eksinf` is the option eksinf spells it as: used when
    the invoked command has it, `value` turning the original's value into eksinf's. Where the
    command has no such option, `otherwise` is said: a note when `no_effect` (the original did
    nothing with the flag there either), else a refusal, exit 2."""

    flag: str
    commands: tuple[str, ...]
    takes_value: bool = False
    eksinf: str | None = None
    otherwise: str = ""
    no_effect: bool = False
    value: Callable[[str], str] | None = None

    def applies_to(self, path: str) -> bool:
        return any(path == c or path.startswith(f"{c} ") or not c for c in self.commands)


def _same(flag: str, *commands: str, takes_value: bool = False) -> Flag:
    """A flag eksinf spells and means as the original did."""
    return Flag(flag, commands, takes_value, eksinf=flag)


FLAGS: tuple[Flag, ...] = (
    # The original's persistent flags.
    Flag(
        "--variant",
        EVERY,
        takes_value=True,
        eksinf="--variant",
        otherwise="--variant has no effect on this command: it reads and writes no variant "
        "space (nor did the original's)",
        no_effect=True,
    ),
    Flag(
        "--profile",
        EVERY,
        takes_value=True,
        eksinf="--aws-profile",
        otherwise="--profile (the AWS CLI profile) has no effect on this command: it makes no "
        "AWS call (the original passed it to `aws` only); eksinf spells it --aws-profile",
        no_effect=True,
    ),
    # components, version
    _same("--json", "components", "status"),
    _same("--plane", "components", "deploy", "teardown", takes_value=True),
    # install
    Flag("--registry", ("install",), takes_value=True, eksinf="--from"),
    _same("--dry-run", "install", "deploy"),
    _same("--prune", "install"),
    _same("--recreate", "install"),
    # deploy
    _same("--target", "deploy", takes_value=True),
    _same("--no-creds-check", "deploy"),
    # link-profile
    _same("--list", "link-profile"),
    _same("--unlink", "link-profile"),
    # enroll
    _same("--name", "enroll", "sandbox", takes_value=True),
    _same("--eks-cluster", "enroll cluster", takes_value=True),
    _same("--region", "enroll cluster", "status", "teardown", takes_value=True),
    _same("--kubeconfig", "enroll", takes_value=True),
    _same("--argocd-namespace", "enroll", takes_value=True),
    _same("--oci-registry", "enroll cluster", takes_value=True),
    _same("--no-argocd", "enroll cluster"),
    _same("--grant-access", "enroll cluster"),
    Flag(
        "--argocd-version",
        ("enroll cluster",),
        takes_value=True,
        otherwise="--argocd-version is not an eksinf option: enroll installs the Argo CD that "
        "the stack pins (ARGOCD_VERSION in versions.env, rendered as the argocd component); "
        "change it there and run `eksinf render`",
    ),
    Flag(
        "--no-placeholder-gate",
        ("enroll cluster",),
        otherwise="--no-placeholder-gate is not an eksinf option: every target space eksinf "
        "makes refuses to publish a unit with a placeholder left (vet-placeholders); fill "
        "them with `eksinf link-profile` instead",
    ),
    Flag(
        "--no-argobot",
        ("enroll cluster",),
        otherwise="--no-argobot has no effect: eksinf never installs argobot",
        no_effect=True,
    ),
    _same("--delete-spaces", "enroll remove"),
    _same(
        "--yes",
        "enroll remove",
        "sandbox down",
        "creds create-user",
        "creds delete-user",
        "teardown",
    ),
    # creds: --cluster was a persistent flag of the group
    Flag(
        "--cluster",
        ("creds",),
        takes_value=True,
        eksinf="--kubeconfig",
        value=_cub_cluster,
        otherwise="--cluster has no effect on this command: it reads no cluster",
        no_effect=True,
    ),
    _same("--user-name", "creds create-user", "creds delete-user", takes_value=True),
    # teardown
    _same("--delete-config", "teardown"),
)


def takes_value(name: str) -> bool | None:
    """Whether the original's `name` took a value (None: not one of its flags)."""
    return next((f.takes_value for f in FLAGS if f.flag == name), None)


def _path(args: list[str], root: Any) -> tuple[str, Any]:
    """The command path `args` invoke and its (typer's click) command, skipping root and group
    options (eksinf's `--stack DIR`, the original's persistent flags and their values)."""
    words: list[str] = []
    command = root
    at = 0
    while at < len(args) and isinstance(getattr(command, "commands", None), dict):
        token = args[at]
        if token == "--":
            break
        name = token.partition("=")[0]
        if token.startswith("-"):
            step = 2 if "=" not in token and (name == "--stack" or takes_value(name)) else 1
            at += step
            continue
        command = command.commands.get(token)
        words.append(token)
        at += 1
    return " ".join(words), command


def translate(args: list[str], root: Any) -> list[str]:
    """`args` with the original's flags made eksinf's (see the module docstring). Raises
    EksinfError (exit 2) for a flag eksinf has no equivalent of."""
    path, command = _path(args, root)
    if path not in COMMANDS or command is None:
        return args
    rows = {f.flag: f for f in FLAGS if f.applies_to(path)}
    options = {opt for p in command.params for opt in p.opts}
    end = args.index("--") if "--" in args else len(args)
    kept: list[str] = []
    moved: list[str] = []
    aliased: list[Flag] = []
    at = 0
    while at < end:
        token = args[at]
        name, eq, inline = token.partition("=")
        row = rows.get(name) if token.startswith("--") else None
        if row is None:
            kept.append(token)
            at += 1
            continue
        value: str | None = None
        if row.takes_value:
            if eq:
                value = inline
            elif at + 1 < end:
                value = args[at + 1]
                at += 1
            elif row.eksinf not in options:
                raise EksinfError(f"{name} needs a value", exit_code=USAGE)
        at += 1
        if row.eksinf is not None and row.eksinf in options:
            if row.eksinf != row.flag:
                aliased.append(row)
            if row.value is not None and value is not None:
                value = row.value(value)
            moved += [row.eksinf] if value is None else [row.eksinf, value]
        elif row.no_effect:
            progress(f"note: {row.otherwise}")
        else:
            raise EksinfError(row.otherwise, hint=f"See `eksinf {path} --help`.", exit_code=USAGE)
    given = {t.partition("=")[0] for t in kept}
    for row in aliased:
        if row.eksinf in given:
            raise EksinfError(
                f"{row.flag} (the original's) and {row.eksinf} mean the same: give one",
                exit_code=USAGE,
            )
    return kept + moved + args[end:]
