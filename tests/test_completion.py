"""`eksinf completion SHELL` prints a script for bash, zsh and fish, and the protocol that script
calls (eksinf with `_EKSINF_COMPLETE` set) answers from the command tree. bash runs the script
for real; zsh and fish are not installed here, so their side of the protocol is called the way
their script calls it (the same environment variables) and the answer is checked."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EKSINF = str(Path(sys.executable).parent / "eksinf")


def _eksinf(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EKSINF, *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_the_script_is_printed_and_calls_eksinf_back(shell):
    done = _eksinf("completion", shell)
    assert done.returncode == 0, done.stderr
    assert "eksinf" in done.stdout
    assert f"_EKSINF_COMPLETE=complete_{shell}" in done.stdout


def test_an_unknown_shell_is_a_usage_error():
    done = _eksinf("completion", "tcsh")
    assert done.returncode == 2
    assert "'tcsh' is not one of 'bash', 'zsh', 'fish'" in done.stderr


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_commands_subcommands_and_options_through_the_script():
    probe = (
        'eval "$(eksinf completion bash)"\n'
        'ask() { COMPREPLY=(); COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1));'
        ' _eksinf_completion eksinf; echo "${COMPREPLY[*]}"; }\n'
        "ask eksinf ren\nask eksinf hub sp\nask eksinf deploy --pl\n"
    )
    env = {**os.environ, "PATH": f"{Path(EKSINF).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-c", probe], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["render", "spaces", "--plane"]


def test_zsh_protocol_answers_with_descriptions():
    done = _eksinf(_EKSINF_COMPLETE="complete_zsh", _TYPER_COMPLETE_ARGS="eksinf hub sp")
    assert done.returncode == 0, done.stderr
    assert '"spaces":"List spaces."' in done.stdout


def test_fish_protocol_answers_with_descriptions():
    done = _eksinf(
        _EKSINF_COMPLETE="complete_fish",
        _TYPER_COMPLETE_FISH_ACTION="get-args",
        _TYPER_COMPLETE_ARGS="eksinf val",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("validate\t")
