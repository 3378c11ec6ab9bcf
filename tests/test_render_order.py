"""A render's components come out in order, chart components rendered on their own thread, and a
failure is the one a render in order meets first."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import pytest

from eksinf.build import render


@dataclass(frozen=True)
class _Comp:
    name: str
    render: str


CHOSEN: list[Any] = [
    _Comp("profile", "copy"),
    _Comp("ack", "helm"),
    _Comp("argocd", "manifest"),
    _Comp("karpenter", "helm"),
    _Comp("workloads", "copy"),
]


def test_outputs_are_in_component_order_and_charts_render_on_one_other_thread():
    threads: dict[str, threading.Thread] = {}

    def one(comp: Any) -> Any:
        threads[comp.name] = threading.current_thread()
        return f"out:{comp.name}"

    assert render._render_all(CHOSEN, one) == [f"out:{c.name}" for c in CHOSEN]
    main = threading.current_thread()
    assert threads["ack"] is threads["karpenter"] is not main
    assert threads["profile"] is threads["argocd"] is threads["workloads"] is main


@pytest.mark.parametrize(
    ("failing", "raised"),
    [
        ({"karpenter", "workloads"}, "karpenter"),  # a chart before a copied component
        ({"argocd", "karpenter"}, "argocd"),  # a manifest before a chart
        ({"ack", "argocd"}, "ack"),
    ],
)
def test_the_failure_raised_is_the_first_in_component_order(failing, raised):
    def one(comp: Any) -> Any:
        if comp.name in failing:
            raise ValueError(comp.name)
        return comp.name

    with pytest.raises(ValueError, match=f"^{raised}$"):
        render._render_all(CHOSEN, one)


def test_a_failed_chart_stops_the_charts_after_it():
    seen: list[str] = []

    def one(comp: Any) -> Any:
        seen.append(comp.name)
        if comp.name == "ack":
            raise ValueError(comp.name)
        return comp.name

    with pytest.raises(ValueError, match="^ack$"):
        render._render_all(CHOSEN, one)
    assert "karpenter" not in seen
