"""`eksinf status` against moto's HTTP server (reached only through the session factory).
pricing:GetProducts, which moto lacks, is `PriceListFake` (tests/aws_stubs.py 5): recorded-shape
answers checked against botocore's model; spot history comes from moto itself."""

from __future__ import annotations

import json

import pytest
from aws_stubs import PriceListFake, assert_botocore_shape, odd_answers, recorded

from eksinf.aws import pricing
from eksinf.aws.scope import StackScope
from eksinf.aws.session import AwsIdentity, AwsSession
from eksinf.aws.status import PriceTable, RawStatus, build_status, format_text, to_json
from eksinf.model.prices import load_prices
from eksinf.model.profile import ORIGINAL_STACK_TAG_KEY, STACK_TAG_KEY, load_profile
from eksinf.model.stack import load_stack


@pytest.fixture(autouse=True)
def price_list(request, monkeypatch, tmp_path) -> PriceListFake:
    """Each test its own price cache (the cache outlives a command on purpose)."""
    monkeypatch.setenv("EKSINF_CACHE_DIR", str(tmp_path / "cache"))
    return PriceListFake().install(monkeypatch)


@pytest.fixture
def scope(stack_dir) -> StackScope:
    return StackScope.from_profile(load_profile(load_stack(stack_dir)), STACK_TAG_KEY)


def session_for(scope: StackScope) -> AwsSession:
    return AwsSession(AwsIdentity.resolve(scope.region))


def run(ec2, itype: str, tags: dict[str, str], count: int = 1) -> list[str]:
    spec = [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]
    out = ec2.run_instances(
        ImageId="ami-12345678",
        InstanceType=itype,
        MinCount=count,
        MaxCount=count,
        **({"TagSpecifications": spec} if tags else {}),
    )
    return [i["InstanceId"] for i in out["Instances"]]


def seed_two_stacks(scope: StackScope) -> dict[str, list[str]]:
    ec2 = session_for(scope).client("ec2")
    ours = [
        *run(ec2, "t4g.medium", {STACK_TAG_KEY: scope.stack, "eks:nodegroup-name": "system"}, 2),
        *run(
            ec2, "g6.xlarge", {scope.cluster_tag: "owned", "karpenter.sh/nodepool": "quantized-gpu"}
        ),
        *run(
            ec2,
            "c7g.large",
            {"eks:cluster-name": scope.cluster, "karpenter.sh/nodepool": "general"},
        ),
        *run(ec2, "x9z.mega", {STACK_TAG_KEY: scope.stack, "karpenter.sh/nodepool": "general"}),
    ]
    theirs = [
        *run(
            ec2,
            "g6.xlarge",
            {STACK_TAG_KEY: "other-stack", "karpenter.sh/nodepool": "quantized-gpu"},
        ),
        *run(ec2, "t4g.medium", {"kubernetes.io/cluster/other": "owned"}),
        *run(ec2, "m7g.large", {}, 2),
    ]
    return {"ours": ours, "theirs": theirs}


def test_status_json_counts_only_this_stack(eksinf, stack_dir, scope, aws_env):
    seeded = seed_two_stacks(scope)
    result = eksinf("status", "--json", cwd=stack_dir)
    assert result.code == 0, result.err
    report = json.loads(result.out)  # clean JSON: warnings went to stderr
    assert sorted(i["id"] for i in report["instances"]) == sorted(seeded["ours"])
    assert report["pools"]["general"]["count"] == 2
    assert report["pools"]["nodegroup/system"]["count"] == 2
    assert report["pools"]["quantized-gpu"] == {"count": 1, "types": ["g6.xlarge"]}
    assert report["gpuNodes"] == 1
    unknown = [i for i in report["instances"] if i["type"] == "x9z.mega"]
    assert unknown[0]["hourly"] is None and unknown[0]["price"] == "unknown"
    # One unknown price makes the total a lower bound, not a number.
    assert report["cost"]["hourly"] is None and report["cost"]["complete"] is False
    # g6.xlarge from the Price List (0.8048), the types it does not list from the table.
    assert report["cost"]["hourlyKnown"] == pytest.approx(2 * 0.0336 + 0.8048 + 0.0725)
    sources = {i["type"]: i["priceSource"] for i in report["instances"]}
    assert sources == {
        "t4g.medium": "table",
        "g6.xlarge": "price-list",
        "c7g.large": "table",
        "x9z.mega": "unknown",
    }
    assert "GPU node" in result.err and "x9z.mega" in result.err


def test_status_counts_instances_the_original_tagged(eksinf, stack_dir, scope, aws_env):
    """A stack the Go original built tags its instances eks-inference.confighub.com/stack only:
    they are the stack's too; that key naming another stack is not."""
    ec2 = session_for(scope).client("ec2")
    ours = run(ec2, "t4g.medium", {ORIGINAL_STACK_TAG_KEY: scope.stack})
    run(ec2, "t4g.medium", {ORIGINAL_STACK_TAG_KEY: "other-stack"})
    result = eksinf("status", "--json", cwd=stack_dir)
    assert result.code == 0, result.err
    assert [i["id"] for i in json.loads(result.out)["instances"]] == ours


def test_status_text_shows_unknown_and_fixed_costs(eksinf, stack_dir, scope, aws_env):
    session = session_for(scope)
    ec2 = session.client("ec2")
    run(ec2, "x9z.mega", {STACK_TAG_KEY: scope.stack})
    vpc = ec2.create_vpc(
        CidrBlock="10.42.0.0/16",
        TagSpecifications=[
            {"ResourceType": "vpc", "Tags": [{"Key": STACK_TAG_KEY, "Value": scope.stack}]}
        ],
    )["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.42.0.0/20")["Subnet"]["SubnetId"]
    eip = ec2.allocate_address(Domain="vpc")["AllocationId"]
    ec2.create_nat_gateway(SubnetId=subnet, AllocationId=eip)  # untagged, but in our VPC
    result = eksinf("status", cwd=stack_dir)
    assert result.code == 0, result.err
    assert "x9z.mega" in result.out and "unknown" in result.out
    assert "fixed nat-gateway" in result.out
    assert "at least $0.04/h" in result.out  # the NAT is priced, the unknown type is not


def test_status_endpoint_down_is_unknown_exit_4(eksinf, stack_dir, monkeypatch, aws_env):
    from conftest import free_port

    monkeypatch.setenv("EKSINF_AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    result = eksinf("status", cwd=stack_dir)
    assert result.code == 4
    assert "cost UNKNOWN" in result.out and "unreachable" in result.out
    as_json = eksinf("status", "--json", cwd=stack_dir)
    assert as_json.code == 4
    report = json.loads(as_json.out)
    assert report["cost"] == "UNKNOWN" and report["instances"] is None
    assert "unreachable" in report["billingError"]


def test_account_mismatch_with_ack_goes_to_stderr_and_json_stays_valid(
    eksinf, stack_dir, tmp_path, aws_env
):
    # FakeKubeApi stands in for the management cluster (tests/aws_stubs.py).
    from aws_stubs import FakeKubeApi

    from eksinf.aws.ack import ack_objects

    mgmt = [c.name for c in load_stack(stack_dir).select(plane="mgmt")]
    vpc = next(o for o in ack_objects(stack_dir / "configs", mgmt) if o.kind == "VPC")
    with FakeKubeApi(token="m") as api:
        api.put(vpc.path, {"status": {"ackResourceMetadata": {"ownerAccountID": "999999999999"}}})
        config = api.kubeconfig(tmp_path / "mgmt.kubeconfig")
        result = eksinf("status", "--json", "--mgmt-kubeconfig", str(config), cwd=stack_dir)
    assert result.code == 0, result.err
    body = json.loads(result.out)  # the warning did not leak into the JSON
    assert "account mismatch" in result.err and "999999999999" in result.err
    assert any("account mismatch" in w for w in body["warnings"])


def test_unknown_region_prices_are_unknown_not_zero(scope):
    raw = RawStatus(
        account="123456789012",
        instances=(
            {
                "InstanceId": "i-1",
                "InstanceType": "t4g.medium",
                "State": {"Name": "running"},
                "Tags": [],
            },
        ),
        nat_gateways=(),
        cluster={"name": scope.cluster, "status": "ACTIVE"},
    )
    report = build_status(scope, raw, PriceTable("t", "d", 730, {}))
    body = to_json(report)
    assert body["cost"]["hourly"] is None and body["cost"]["unknownItems"] == 2
    assert body["fixed"] == [{"kind": "eks-control-plane", "id": scope.cluster, "hourly": None}]
    # with nothing priced, the text says unknown, not "at least $0.00/h"
    cost = [line for line in format_text(report) if line.startswith("cost:")]
    assert cost == ["cost: unknown; 2 item(s) of unknown price (prices as of d)"]


def nodeclass(name: str, subnets: int, sgs: int, amis: int, ready: str = "True") -> dict:
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "status": {
            "subnets": [{"id": f"subnet-{i}"} for i in range(subnets)],
            "securityGroups": [{"id": f"sg-{i}"} for i in range(sgs)],
            "amis": [{"id": f"ami-{i}"} for i in range(amis)],
            "capacityReservations": [],
            "conditions": [{"type": "Ready", "status": ready}],
        },
    }


def test_status_shows_nodeclass_resolution_from_the_workload_cluster(
    eksinf, stack_dir, scope, tmp_path, aws_env
):
    # FakeKubeApi stands in for the workload cluster's API (tests/aws_stubs.py).
    from aws_stubs import FakeKubeApi, ref_path

    from eksinf.aws.status import NODECLASS_PATH

    with FakeKubeApi(token="w") as api:
        api.put(f"{ref_path(NODECLASS_PATH)}/general", nodeclass("general", 3, 2, 1))
        api.put(f"{ref_path(NODECLASS_PATH)}/gpu", nodeclass("gpu", 0, 2, 1, ready="False"))
        config = api.kubeconfig(tmp_path / "workload.kubeconfig")
        result = eksinf("status", "--json", "--kubeconfig", str(config), cwd=stack_dir)
        text = eksinf("status", "--kubeconfig", str(config), cwd=stack_dir)
    assert result.code == 0, result.err
    body = json.loads(result.out)
    by_name = {nc["name"]: nc for nc in body["nodeClasses"]}
    assert by_name["general"]["subnets"] == 3 and by_name["gpu"]["ready"] == "False"
    assert "EC2NodeClass gpu resolves no subnets" in result.err
    assert "EC2NodeClass general" not in result.err
    assert "nodeclass gpu: ready=False subnets=0" in text.out


def test_unreachable_workload_cluster_is_unknown_not_empty(eksinf, stack_dir, tmp_path, aws_env):
    from aws_stubs import FakeKubeApi

    with FakeKubeApi() as api:
        config = api.kubeconfig(tmp_path / "workload.kubeconfig")
    # the server is shut down now: nothing listens there
    result = eksinf("status", "--json", "--kubeconfig", str(config), cwd=stack_dir)
    assert result.code == 0  # billing is still known; the node-class part says UNKNOWN
    body = json.loads(result.out)
    assert body["nodeClasses"] is None and body["nodeClassError"].startswith("UNKNOWN")


def test_price_list_rate_is_cached_with_its_time_and_reused(
    eksinf, stack_dir, scope, price_list, aws_env
):
    ec2 = session_for(scope).client("ec2")
    run(ec2, "g6.xlarge", {STACK_TAG_KEY: scope.stack})
    first = json.loads(eksinf("status", "--json", cwd=stack_dir).out)
    (row,) = first["instances"]
    assert (row["hourly"], row["priceSource"]) == (0.8048, "price-list")
    assert price_list.calls == [
        {
            "regionCode": scope.region,
            "instanceType": "g6.xlarge",
            "operatingSystem": "Linux",
            "tenancy": "Shared",
            "preInstalledSw": "NA",
            "capacitystatus": "Used",
            "licenseModel": "No License required",
        }
    ]
    cached = json.loads(pricing.cache_file(scope.region).read_text())
    assert cached["onDemand"]["g6.xlarge"] == {"usd": 0.8048, "readAt": row["priceReadAt"]}
    second = json.loads(eksinf("status", "--json", cwd=stack_dir).out)
    assert second["instances"] == first["instances"] and len(price_list.calls) == 1


def test_unreachable_price_list_falls_back_to_the_labelled_table(
    eksinf, stack_dir, scope, price_list, aws_env
):
    price_list.failure = "AccessDeniedException"
    ec2 = session_for(scope).client("ec2")
    run(ec2, "g6.xlarge", {STACK_TAG_KEY: scope.stack})
    result = eksinf("status", "--json", cwd=stack_dir)
    (row,) = json.loads(result.out)["instances"]
    assert (row["hourly"], row["priceSource"], row["priceReadAt"]) == (
        0.8048,
        "table",
        "2025-05-31",
    )
    assert "live prices unavailable (pricing get-products: AccessDeniedException" in result.err
    assert not pricing.cache_file(scope.region).exists()  # a failure is not cached
    text = eksinf("status", cwd=stack_dir)
    assert "$0.805/h (on-demand, table)" in text.out


def test_spot_instances_are_priced_from_spot_history_of_their_zone(
    eksinf, stack_dir, scope, aws_env
):
    """moto implements DescribeSpotPriceHistory (every price 0.00001): the spot instance gets
    its zone's spot rate, not the on-demand one."""
    ec2 = session_for(scope).client("ec2")
    ec2.run_instances(
        ImageId="ami-12345678",
        InstanceType="g6.xlarge",
        MinCount=1,
        MaxCount=1,
        InstanceMarketOptions={"MarketType": "spot"},
        Placement={"AvailabilityZone": f"{scope.region}a"},
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": STACK_TAG_KEY, "Value": scope.stack}]}
        ],
    )
    (row,) = json.loads(eksinf("status", "--json", cwd=stack_dir).out)["instances"]
    assert (row["lifecycle"], row["priceSource"], row["hourly"]) == ("spot", "spot-history", 0.0)
    cached = json.loads(pricing.cache_file(scope.region).read_text())
    assert cached["spot"][f"g6.xlarge@{scope.region}a"]["usd"] == 0.00001


def test_spot_without_history_is_unknown_not_the_on_demand_rate(scope):
    raw = RawStatus(
        account="123456789012",
        instances=(
            {
                "InstanceId": "i-1",
                "InstanceType": "g6.xlarge",
                "InstanceLifecycle": "spot",
                "Placement": {"AvailabilityZone": "us-west-2a"},
                "State": {"Name": "running"},
            },
        ),
        nat_gateways=(),
        cluster=None,
    )
    live = pricing.LiveRates(on_demand={"g6.xlarge": 0.8048}, errors=["ec2: refused"])
    body = to_json(build_status(scope, raw, load_prices(), live=live))
    (row,) = body["instances"]
    assert (row["hourly"], row["priceSource"]) == (None, "unknown")
    assert any("g6.xlarge (spot)" in w for w in body["warnings"])


def test_recorded_answers_parse_to_the_rates_they_hold():
    """The recorded answers fit botocore's output shapes; the parsers read the on-demand hour
    rate and the latest spot price per zone."""
    from datetime import datetime

    products = assert_botocore_shape(
        "pricing", "GetProducts", recorded("get-products-g6.xlarge-us-west-2.json")
    )
    assert pricing.parse_on_demand(products["PriceList"], "g6.xlarge") == 0.8048
    assert pricing.parse_on_demand(products["PriceList"], "g6.2xlarge") is None
    history = assert_botocore_shape(
        "ec2",
        "DescribeSpotPriceHistory",
        recorded("describe-spot-price-history-g6.xlarge.json"),
    )["SpotPriceHistory"]
    parsed = [{**h, "Timestamp": datetime.fromisoformat(h["Timestamp"])} for h in history]
    assert pricing.parse_spot(parsed) == {
        "g6.xlarge@us-west-2a": 0.3512,
        "g6.xlarge@us-west-2b": 0.2987,
    }


# ---- no tracebacks, no NaN -------------------------------------------------


def strict_json(text: str):
    """JSON as a strict parser reads it: NaN and infinities are refused."""

    def refuse(constant: str):
        raise AssertionError(f"{constant} in --json output")

    return json.loads(text, parse_constant=refuse)


def no_traceback(result) -> None:
    assert "Traceback" not in result.err + result.out


def spot_instance(scope: StackScope) -> None:
    session_for(scope).client("ec2").run_instances(
        ImageId="ami-12345678",
        InstanceType="g6.xlarge",
        MinCount=1,
        MaxCount=1,
        InstanceMarketOptions={"MarketType": "spot"},
        Placement={"AvailabilityZone": f"{scope.region}a"},
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": STACK_TAG_KEY, "Value": scope.stack}]}
        ],
    )


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ({"usd": float("nan"), "readAt": "NOW"}, "price nan is not a positive finite number"),
        ({"usd": -3.5, "readAt": "NOW"}, "price -3.5 is not a positive finite number"),
        ({"usd": float("inf"), "readAt": "NOW"}, "price inf is not a positive finite number"),
        ({"usd": "0.8", "readAt": "NOW"}, "price '0.8' is not a positive finite number"),
        ({"usd": 9.99, "readAt": "2999-01-01T00:00:00+00:00"}, "in the future"),
        ({"usd": 9.99, "readAt": "2026-01-01T00:00:00"}, "is not an ISO time with a zone"),
        ({"usd": 9.99}, "time read None is not an ISO time"),
        ([1, 2], "not an object"),
    ],
)
def test_a_corrupt_price_cache_entry_is_refused_named_and_read_again(
    eksinf, stack_dir, scope, price_list, aws_env, entry, why
):
    from datetime import UTC, datetime

    from safety import fingerprint

    now = datetime.now(UTC).isoformat(timespec="seconds")
    if isinstance(entry, dict) and entry.get("readAt") == "NOW":
        entry = {**entry, "readAt": now}
    run(session_for(scope).client("ec2"), "g6.xlarge", {STACK_TAG_KEY: scope.stack})
    spot_instance(scope)
    spot_key = f"g6.xlarge@{scope.region}a"
    path = pricing.cache_file(scope.region)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"onDemand": {"g6.xlarge": entry}, "spot": {spot_key: entry}}))
    stack_before = fingerprint(stack_dir)

    result = eksinf("status", "--json", cwd=stack_dir)
    assert result.code == 0, result.err
    no_traceback(result)
    report = strict_json(result.out)
    rows = {r["lifecycle"]: r for r in report["instances"]}
    assert (rows["on-demand"]["hourly"], rows["on-demand"]["priceSource"]) == (0.8048, "price-list")
    assert rows["spot"]["priceSource"] == "spot-history"  # moto's spot history, read again
    assert len(price_list.calls) == 1
    for key in ("g6.xlarge", spot_key):
        (line,) = [x for x in result.err.splitlines() if f"price cache {path}: {key} refused" in x]
        assert why in line and line.endswith("; read again")
    cached = strict_json(path.read_text())  # rewritten with the fresh, finite answers
    assert cached["onDemand"]["g6.xlarge"]["usd"] == 0.8048
    assert cached["spot"][spot_key]["usd"] == 0.00001
    text = eksinf("status", cwd=stack_dir)  # now trusted: no refusal, no new call
    assert text.code == 0 and "refused" not in text.err and len(price_list.calls) == 1
    assert fingerprint(stack_dir) == stack_before


def test_a_cache_that_is_not_json_is_read_again(eksinf, stack_dir, scope, price_list, aws_env):
    run(session_for(scope).client("ec2"), "g6.xlarge", {STACK_TAG_KEY: scope.stack})
    path = pricing.cache_file(scope.region)
    path.parent.mkdir(parents=True)
    path.write_text('{"onDemand": NaN, "spot": [')
    result = eksinf("status", "--json", cwd=stack_dir)
    assert result.code == 0, result.err
    assert strict_json(result.out)["instances"][0]["hourly"] == 0.8048


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda inst: inst.pop("State"), "with State.Name missing"),
        (lambda inst: inst.update(State={"Name": 7}), "with State.Name 7, not a name"),
        (lambda inst: inst.update(State="running"), "with State.Name missing"),
        (lambda inst: inst.pop("InstanceType"), "with InstanceType missing"),
        (lambda inst: inst.pop("InstanceId"), "with InstanceId missing"),
    ],
)
def test_odd_instance_answers_are_one_line_errors(
    eksinf, stack_dir, scope, aws_env, monkeypatch, change, why
):
    run(session_for(scope).client("ec2"), "g6.xlarge", {STACK_TAG_KEY: scope.stack})

    def apply(parsed) -> None:
        for reservation in parsed.get("Reservations", []):
            for inst in reservation.get("Instances", []):
                change(inst)

    odd_answers(monkeypatch, "DescribeInstances", apply)
    for args in (("status",), ("status", "--json")):
        result = eksinf(*args, cwd=stack_dir)
        no_traceback(result)
        assert result.code == 4, result.err
        errors = [line for line in result.err.splitlines() if line.startswith("eksinf: ")]
        assert len(errors) == 1  # the reason: in that line, or (cost UNKNOWN) in the report
        assert f"AWS answered ec2 describe-instances {why}" in errors[0] + result.out
    body = strict_json(result.out)
    assert body.get("exit") == 4 or body["cost"] == "UNKNOWN"


@pytest.mark.parametrize("price", ["NaN", "-1", "Infinity", "abc", None])
def test_odd_spot_prices_are_unknown_never_nan(
    eksinf, stack_dir, scope, aws_env, monkeypatch, price
):
    spot_instance(scope)

    def apply(parsed) -> None:
        for entry in parsed.get("SpotPriceHistory", []):
            if price is None:
                entry.pop("SpotPrice", None)
            else:
                entry["SpotPrice"] = price

    odd_answers(monkeypatch, "DescribeSpotPriceHistory", apply)
    result = eksinf("status", "--json", cwd=stack_dir)
    assert result.code == 0, result.err
    no_traceback(result)
    (row,) = strict_json(result.out)["instances"]
    assert (row["hourly"], row["priceSource"]) == (None, "unknown")


def test_odd_price_list_items_are_no_rate(scope):
    """GetProducts' PriceList holds JSON strings; anything else in it holds no rate."""
    good = recorded(f"get-products-g6.xlarge-{scope.region}.json")["PriceList"]
    assert pricing.parse_on_demand(["{not json", "[]", "7", *good], "g6.xlarge") == 0.8048
    nan = json.loads(good[0])
    for term in nan["terms"]["OnDemand"].values():
        for dim in term["priceDimensions"].values():
            dim["pricePerUnit"]["USD"] = "NaN"
    assert pricing.parse_on_demand([json.dumps(nan)], "g6.xlarge") is None
    assert pricing.parse_on_demand([json.dumps({"terms": []})], "g6.xlarge") is None


def test_the_json_emitter_never_prints_nan(eksinf, stack_dir, scope, aws_env, monkeypatch):
    """The last line of defence: were a non-finite number ever to reach --json (the sources
    above keep them out), the CLI's one emitter refuses it, and stdout stays strict JSON."""
    from eksinf.aws import status as status_mod

    real = status_mod.to_json
    monkeypatch.setattr(status_mod, "to_json", lambda s: {**real(s), "poison": float("nan")})
    result = eksinf("status", "--json", cwd=stack_dir)
    assert result.code == 1 and "Traceback" not in result.err
    body = strict_json(result.out)
    assert body["exit"] == 1 and "not finite" in body["error"]
    assert "NaN" not in result.out
