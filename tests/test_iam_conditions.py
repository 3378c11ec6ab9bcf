"""model.iam decides who a trust admits the way IAM does. Every rule asserted here is IAM's,
from the IAM User Guide: "IAM JSON policy elements: Condition operators" (StringEquals is
exact and case-sensitive; StringLike takes `*` and `?` anywhere; a key absent from the request
makes a condition false except under a negated operator, ...IfExists; values for one key are
ORed, keys and operators ANDed) and "Single-valued vs. multivalued context keys" (ForAnyValue
needs one request value to match, ForAllValues is true when the key is absent).
"""

from __future__ import annotations

import json

import pytest

from eksinf.model import iam

OIDC = "arn:aws:iam::111122223333:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/X"
SUB = "oidc.eks.us-west-2.amazonaws.com/id/X:sub"
AUD = "oidc.eks.us-west-2.amazonaws.com/id/X:aud"


def irsa_trust(condition: dict, effect: str = "Allow") -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": effect,
                    "Principal": {"Federated": OIDC},
                    "Action": "sts:AssumeRoleWithWebIdentity",
                    "Condition": condition,
                }
            ],
        }
    )


def admits(condition: dict, ns: str = "models", name: str = "reader") -> bool | None:
    return iam.admits(irsa_trust(condition), iam.irsa_request(ns, name))


@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [
        ("system:serviceaccount:*:reader", "system:serviceaccount:models:reader", True),
        ("system:serviceaccount:*", "system:serviceaccount:a:b", True),  # * spans ':'
        ("system:serviceaccount:model?:reader", "system:serviceaccount:models:reader", True),
        ("system:serviceaccount:model?:reader", "system:serviceaccount:model:reader", False),
        ("system:serviceaccount:*:reader", "system:serviceaccount:models:Reader", False),
        ("a.b", "axb", False),  # only * and ? are special
    ],
)
def test_string_like(pattern: str, value: str, expected: bool) -> None:
    assert iam.like(pattern, value) is expected


def test_string_equals_is_exact_and_string_like_takes_wildcards() -> None:
    assert admits({"StringEquals": {SUB: "system:serviceaccount:models:reader"}}) is True
    assert admits({"StringEquals": {SUB: "system:serviceaccount:models:reader"}}, "batch") is False
    assert admits({"StringEquals": {SUB: "system:serviceaccount:*:reader"}}) is False
    assert admits({"StringLike": {SUB: "system:serviceaccount:*:reader"}}, "batch") is True
    assert admits({"StringEqualsIgnoreCase": {SUB: "SYSTEM:serviceaccount:models:READER"}})


def test_values_are_ored_keys_and_operators_anded() -> None:
    both = ["system:serviceaccount:models:reader", "system:serviceaccount:batch:reader"]
    assert admits({"StringEquals": {SUB: both}}, "batch") is True
    anded = {"StringEquals": {SUB: both[0], AUD: "sts.amazonaws.com"}}
    assert admits(anded) is True
    assert admits({"StringEquals": {SUB: both[0], AUD: "other"}}) is False
    two_ops = {"StringLike": {SUB: "system:serviceaccount:*:reader"}, "StringEquals": {AUD: "x"}}
    assert admits(two_ops) is False


def test_negated_operators_match_none_of_the_values() -> None:
    cond = {"StringNotEquals": {SUB: ["system:serviceaccount:batch:reader"]}}
    assert admits(cond) is True and admits(cond, "batch") is False
    assert admits({"StringNotLike": {SUB: "system:serviceaccount:b*"}}, "batch") is False


def test_set_operators_on_sub() -> None:
    assert admits({"ForAnyValue:StringLike": {SUB: "system:serviceaccount:*:reader"}}) is True
    assert admits({"ForAnyValue:StringEquals": {SUB: "system:serviceaccount:x:y"}}) is False
    assert admits({"ForAllValues:StringLike": {SUB: "system:serviceaccount:models:*"}}) is True


def test_absent_keys_follow_the_operator() -> None:
    """A Pod Identity session carries no tag the trust names: absent, not unknown."""
    doc = {
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": iam.POD_IDENTITY_SERVICE},
                "Action": ["sts:AssumeRole", "sts:TagSession"],
                "Condition": {},
            }
        ]
    }
    request = iam.Request(
        "sts:AssumeRole", service=iam.POD_IDENTITY_SERVICE, context={"aws:requesttag/team": []}
    )
    for op, expected in [
        ("StringEquals", False),
        ("StringNotEquals", True),
        ("StringEqualsIfExists", True),
        ("ForAllValues:StringEquals", True),
        ("ForAnyValue:StringEquals", False),
    ]:
        doc["Statement"][0]["Condition"] = {op: {"aws:RequestTag/team": "ml"}}
        assert iam.admits(doc, request) is expected, op


def test_unknown_keys_are_unknown_and_deny_wins() -> None:
    cond = {"StringEquals": {SUB: "system:serviceaccount:models:reader", "aws:SourceIp": "1"}}
    assert admits(cond) is None  # the caller cannot know the source IP: never a pass
    allow = json.loads(irsa_trust({"StringLike": {SUB: "system:serviceaccount:*:reader"}}))
    deny = json.loads(
        irsa_trust({"StringEquals": {SUB: "system:serviceaccount:batch:reader"}}, "Deny")
    )
    doc = {"Statement": allow["Statement"] + deny["Statement"]}
    assert iam.admits(doc, iam.irsa_request("models", "reader")) is True
    assert iam.admits(doc, iam.irsa_request("batch", "reader")) is False


def test_condition_keys_are_case_insensitive_and_documents_may_be_url_encoded() -> None:
    text = irsa_trust({"StringEquals": {SUB.upper(): "system:serviceaccount:models:reader"}})
    assert iam.admits(text, iam.irsa_request("models", "reader")) is True
    encoded = "%7B" + text[1:]  # IAM's GetRole returns the document URL-encoded
    assert iam.admits(encoded, iam.irsa_request("models", "reader")) is True
