"""The catalog (offerings, prices, estimates) and ``nodewright catalog`` on a primed, offline catalog."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nodewright.cli import main
from nodewright.cloud import aws
from nodewright.cloud.catalog import (
    CATALOG_SNAPSHOT_MAX_AGE_SECONDS,
    Catalog,
    CatalogData,
    clear_caches,
    decode_snapshot,
    encode_snapshot,
    prime_catalog,
)
from nodewright.cloud.pricetable import PriceTable, estimate_on_demand_price
from nodewright.cloud.state import InMemoryStateStore

REGION = "us-west-2"
ZONES = ("us-west-2a", "us-west-2b", "us-west-2c")


def ec2_item(
    name: str, vcpus: int, mib: int, arch: str, *, enis: int = 3, ips: int = 10, **extra: Any
) -> dict[str, Any]:
    """A DescribeInstanceTypes item, trimmed to the fields EC2 always returns."""
    return {
        "InstanceType": name,
        "CurrentGeneration": True,
        "SupportedUsageClasses": ["on-demand", "spot"],
        "SupportedRootDeviceTypes": ["ebs"],
        "SupportedVirtualizationTypes": ["hvm"],
        "BareMetal": False,
        "Hypervisor": "nitro",
        "ProcessorInfo": {
            "SupportedArchitectures": [arch],
            "Manufacturer": "Intel" if arch == "x86_64" else "AWS",
        },
        "VCpuInfo": {"DefaultVCpus": vcpus},
        "MemoryInfo": {"SizeInMiB": mib},
        "InstanceStorageSupported": False,
        "NetworkInfo": {
            "NetworkPerformance": "Up to 10 Gigabit",
            "MaximumNetworkInterfaces": enis,
            "Ipv4AddressesPerInterface": ips,
            "EncryptionInTransitSupported": False,
        },
        **extra,
    }


ITEMS = {
    "m5.large": ec2_item("m5.large", 2, 8192, "x86_64"),
    "c5.large": ec2_item("c5.large", 2, 4096, "x86_64"),
    "m6g.large": ec2_item("m6g.large", 2, 8192, "arm64"),
    "g4dn.xlarge": ec2_item(
        "g4dn.xlarge",
        4,
        16384,
        "x86_64",
        GpuInfo={
            "Gpus": [{"Name": "T4", "Manufacturer": "NVIDIA", "Count": 1, "MemoryInfo": {"SizeInMiB": 16384}}]
        },
    ),
    "t2.micro": {
        **ec2_item("t2.micro", 1, 1024, "x86_64", enis=2, ips=2),
        "SupportedUsageClasses": ["on-demand"],
        "Hypervisor": "xen",
    },
}
OFFERED = {name: frozenset(ZONES[:2] if name == "g4dn.xlarge" else ZONES) for name in ITEMS}


@pytest.fixture
def primed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("STATE_TABLE", raising=False)
    clear_caches()
    aws.reset_clients()
    prime_catalog((REGION, None), CatalogData(types=ITEMS, zones=OFFERED, fetched_at=0))
    yield
    clear_caches()


def catalog(store: InMemoryStateStore) -> Catalog:
    def no_fetch(_: Any) -> CatalogData:
        raise AssertionError("the primed catalog must be used, not DescribeInstanceTypes")

    return Catalog(ec2=None, store=store, cache_key=(REGION, None), loader=no_fetch)


def test_offerings_are_priced_per_zone_and_marked_unavailable(primed: None) -> None:
    store = InMemoryStateStore()
    store.put_price_table(PriceTable(on_demand={"m5.large": 0.096}, spot={("m5.large", "us-west-2a"): 0.031}))
    store.mark_unavailable("m5.large", "us-west-2b", "spot")
    offerings = {
        (o.zone, o.capacity_type): o
        for o in catalog(store).offerings("m5.large", unavailable=store.unavailable_offerings())
    }
    assert len(offerings) == 6
    assert offerings[("us-west-2a", "spot")].price == 0.031
    assert not offerings[("us-west-2a", "spot")].estimated
    assert offerings[("us-west-2b", "spot")].available is False
    assert offerings[("us-west-2c", "spot")].price == pytest.approx(0.096 * 0.4)  # no history: estimate
    assert offerings[("us-west-2c", "spot")].estimated
    assert offerings[("us-west-2c", "on-demand")].price == 0.096


def test_on_demand_only_type_has_no_spot_offerings_and_zones_restrict(primed: None) -> None:
    offerings = catalog(InMemoryStateStore()).offerings("t2.micro", zones=["us-west-2a"])
    assert [(o.zone, o.capacity_type) for o in offerings] == [("us-west-2a", "on-demand")]
    assert catalog(InMemoryStateStore()).offerings("x9.unknown") == []


def test_missing_price_is_estimated_with_a_warning_and_a_metric(
    primed: None, caplog: pytest.LogCaptureFixture
) -> None:
    from nodewright.observability import logger, metrics

    # The warning must be emitted whatever level an earlier test in this process left the shared
    # Logger at; caplog gives the level back after the test.
    caplog.set_level(logging.WARNING, logger=logger().name)
    metrics().clear_metrics()
    price, estimated = catalog(InMemoryStateStore()).on_demand_price("g4dn.xlarge")
    assert estimated
    assert price == estimate_on_demand_price(ITEMS["g4dn.xlarge"])
    assert "no on-demand price" in caplog.text
    assert metrics().metric_set["PriceEstimated"]["Value"] == [1.0]
    catalog(InMemoryStateStore()).on_demand_price("g4dn.xlarge")  # warned once per type per container
    assert metrics().metric_set["PriceEstimated"]["Value"] == [1.0]
    caplog.clear()
    catalog(InMemoryStateStore()).instance_types()  # the other four: one line, one metric value
    assert caplog.text.count("no on-demand price") == 1
    assert metrics().metric_set["PriceEstimated"]["Value"] == [1.0, 4.0]
    metrics().clear_metrics()


def test_instance_types_reach_the_scheduler_model_with_kubelet_settings(primed: None) -> None:
    store = InMemoryStateStore()
    store.put_price_table(PriceTable(on_demand={"m5.large": 0.096}))
    types = {t.name: t for t in catalog(store).instance_types(zones=["us-west-2a"], kubelet={"maxPods": 20})}
    assert set(types) == set(ITEMS)
    m5 = types["m5.large"]
    assert m5.capacity["pods"] == 20
    assert {o.zone for o in m5.offerings} == {"us-west-2a"}
    assert m5.labels["kubernetes.io/arch"] == "amd64"


def write_prices(tmp_path: Path) -> Path:
    path = tmp_path / "prices.json"
    path.write_text(
        json.dumps({"prices": {"m5.large": 0.096, "c5.large": 0.085, "m6g.large": 0.077, "t2.micro": 0.0116}})
    )
    return path


def test_cli_lists_allowed_types_cheapest_first_with_allocatable(
    primed: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodepool = tmp_path / "nodepool.yaml"
    nodepool.write_text(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\n"
        "spec:\n  template:\n    spec:\n"
        "      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n"
        "      requirements:\n"
        "      - {key: kubernetes.io/arch, operator: In, values: [amd64]}\n"
        "      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n"
        "      - {key: topology.kubernetes.io/zone, operator: In, values: [us-west-2b]}\n"
    )
    code = main(
        [
            "catalog",
            "--region",
            REGION,
            "--requirements",
            str(nodepool),
            "--prices",
            str(write_prices(tmp_path)),
            "--json",
        ]
    )
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["instanceType"] for r in rows] == ["t2.micro", "c5.large", "m5.large", "g4dn.xlarge"]
    assert {r["capacityType"] for r in rows} == {"on-demand"}
    assert {r["zone"] for r in rows} == {"us-west-2b"}
    assert rows[0]["price"] == 0.0116
    assert rows[-1]["priceEstimated"] is True
    assert rows[2]["allocatable"]["pods"] == "29"  # 3 ENIs x (10 - 1) + 2
    assert "m6g.large" not in {r["instanceType"] for r in rows}


def test_cli_table_marks_estimated_prices(
    primed: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["catalog", "--region", REGION, "--prices", str(write_prices(tmp_path)), "--limit", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:3] == ["TYPE", "ARCH", "PRICE/H"]
    assert out[1].split()[0] == "t2.micro"
    assert out[-1].startswith("... ")


def test_cli_reports_a_requirements_file_that_is_not_a_nodepool(
    primed: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Deployment\nmetadata: {name: x}\n")
    assert main(["catalog", "--region", REGION, "--requirements", str(bad)]) == 2
    assert "no NodePool" in capsys.readouterr().err
    assert main(["catalog", "--region", REGION, "--requirements", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_cli_adds_each_node_s_ebs_volumes_to_its_price(
    primed: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodeclass = tmp_path / "nodeclass.yaml"
    nodeclass.write_text(
        "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: big-root}\n"
        "spec:\n  amiSelectorTerms: [{alias: al2023@latest}]\n  role: r\n"
        "  blockDeviceMappings:\n"
        "  - {deviceName: /dev/xvda, rootVolume: true, ebs: {volumeSize: 100Gi, volumeType: gp3}}\n"
    )
    prices = str(write_prices(tmp_path))
    args = ["catalog", "--region", REGION, "--prices", prices, "--limit", "1"]
    assert main([*args, "--json", "--nodeclass", str(nodeclass)]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["ebsPrice"] == pytest.approx(100 * 0.08 / 730, abs=1e-6)  # gp3 $0.08/GiB-month
    assert row["nodePrice"] == pytest.approx(row["price"] + row["ebsPrice"], abs=1e-6)
    assert main(args) == 0
    assert "NODE/H = PRICE/H + EBS 20Gi gp3: $0.0022/h per node" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "complaint"),
    [
        (b"\xff\xfe\x00binary", "not UTF-8 text"),
        (b"requirements: 5\n", "requirements must be a list of {key, operator, values} terms"),
        (b"- 5\n- x\n", "requirement 0 must be a mapping"),
        (b"- {operator: In, values: [a]}\n", "requirement 0: key must be a string"),
        (b"- {key: a, operator: In, values: x}\n", "requirement 0 (a): values must be a list"),
        (b"- {key: a, operator: Foo, values: [x]}\n", "unknown operator 'Foo'"),
    ],
    ids=["binary", "scalar", "not-mappings", "no-key", "values-string", "bad-operator"],
)
def test_cli_reports_a_requirements_file_it_cannot_use_in_one_line(
    primed: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, complaint: str
) -> None:
    bad = tmp_path / "requirements.yaml"
    bad.write_bytes(content)
    assert main(["catalog", "--region", REGION, "--requirements", str(bad)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: "), line
    assert str(bad) in line
    assert complaint in line


@pytest.mark.parametrize(
    ("content", "complaint"),
    [
        (b"\xff\xfe{", "not UTF-8 text"),
        (b"{not json", "not JSON"),
        (b"[1, 2]", 'a JSON object {"prices": {type: usd}}'),
        (b'{"prices": [1, 2]}', 'a JSON object {"prices": {type: usd}}'),
        (b'{"prices": {"m5.large": "cheap"}}', "m5.large: 'cheap' is not a price"),
    ],
    ids=["binary", "not-json", "list", "prices-list", "price-text"],
)
def test_cli_reports_a_prices_file_it_cannot_use_in_one_line(
    primed: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, complaint: str
) -> None:
    bad = tmp_path / "prices.json"
    bad.write_bytes(content)
    assert main(["catalog", "--region", REGION, "--prices", str(bad)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: cannot use prices file {bad}: "), line
    assert complaint in line
    assert main(["catalog", "--region", REGION, "--prices", str(tmp_path)]) == 2
    assert "Is a directory" in capsys.readouterr().err


def test_cli_says_why_a_nodeclass_file_holds_no_ec2nodeclass(
    primed: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "nodeclass.yaml"
    bad.write_text("- a\n- b\n")
    assert main(["catalog", "--region", REGION, "--nodeclass", str(bad)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert (
        line
        == f"error: {bad} holds no EC2NodeClass (a manifest must be a YAML mapping with apiVersion and kind)"
    )


def test_cli_shows_overlay_prices_and_says_why(
    primed: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Savings Plan overlay on m5.large: the row is priced by it, names it and the price before."""
    overlays = tmp_path / "overlays.yaml"
    overlays.write_text(
        "apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: m5-savings}\n"
        "spec:\n  requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}]\n"
        "  priceAdjustment: '-50%'\n"
        "---\napiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: aa-conflict}\n"
        "spec:\n  requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}]\n"
        "  price: '1'\n"
    )
    requirements = tmp_path / "requirements.yaml"
    requirements.write_text("- {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n")
    prices = str(write_prices(tmp_path))
    args = ["catalog", "--region", REGION, "--prices", prices, "--requirements", str(requirements)]
    assert main([*args, "--overlays", str(overlays), "--json"]) == 0
    captured = capsys.readouterr()
    rows = {r["instanceType"]: r for r in json.loads(captured.out)}
    assert rows["m5.large"]["price"] == pytest.approx(0.048)
    assert rows["m5.large"]["basePrice"] == pytest.approx(0.096)
    assert rows["m5.large"]["nodeOverlays"] == ["m5-savings"]
    assert rows["c5.large"]["nodeOverlays"] == []
    assert "NodeOverlay aa-conflict not applied: Conflict" in captured.err
    assert main([*args, "--overlays", str(overlays)]) == 0
    table = capsys.readouterr().out
    assert "m5-savings (was 0.0960)" in table


def test_cli_shows_the_reservations_a_nodeclass_selects_as_reserved_rows(
    primed: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodeclass = tmp_path / "nodeclass.yaml"
    nodeclass.write_text(
        "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: ml}\n"
        "spec:\n  amiSelectorTerms: [{alias: al2023@latest}]\n  role: r\n"
        "  capacityReservationSelectorTerms: [{id: cr-0aaaaaaaaaaaaaaa1}]\n"
    )
    saved = tmp_path / "reservations.json"
    item = {
        "CapacityReservationId": "cr-0aaaaaaaaaaaaaaa1",
        "OwnerId": "123456789012",
        "InstanceType": "m5.large",
        "AvailabilityZone": "us-west-2a",
        "AvailableInstanceCount": 2,
        "TotalInstanceCount": 2,
        "State": "active",
        "InstanceMatchCriteria": "targeted",
        "ReservationType": "default",
        "Interruptible": True,
    }
    saved.write_text(
        json.dumps({"CapacityReservations": [item, {**item, "CapacityReservationId": "cr-other"}]})
    )
    requirements = tmp_path / "requirements.yaml"
    requirements.write_text("- {key: karpenter.sh/capacity-type, operator: In, values: [reserved]}\n")
    prices = str(write_prices(tmp_path))
    args = ["catalog", "--region", REGION, "--prices", prices, "--requirements", str(requirements)]
    assert main([*args, "--nodeclass", str(nodeclass), "--reservations", str(saved), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["instanceType"], row["capacityType"], row["zone"]) == ("m5.large", "reserved", "us-west-2a")
    assert row["capacityReservationId"] == "cr-0aaaaaaaaaaaaaaa1"
    assert row["interruptible"] is True
    assert row["price"] == pytest.approx(0.096 / 10_000_000)
    saved.write_text("{}\n")
    assert main([*args, "--nodeclass", str(nodeclass), "--reservations", str(saved)]) == 2
    assert "not a DescribeCapacityReservations answer" in capsys.readouterr().err


def test_a_windows_types_reserved_offering_keeps_its_reservation_and_karpenters_price() -> None:
    """A Windows node's offerings carry the licence; a reservation's stays the reservation (its id,
    type, free slots) at Karpenter's on-demand price / 10^7, which no licence changes."""
    from nodewright.cloud.catalog import RESERVED, RawOffering, windows_offerings

    info = ec2_item("m5.large", 2, 8192, "x86_64")
    reserved = RawOffering(
        "us-west-2a",
        RESERVED,
        1e-8,
        True,
        reservation_id="cr-1",
        reservation_type="default",
        reservation_capacity=2,
    )
    on_demand = RawOffering("us-west-2a", "on-demand", 0.096, True)
    windows_reserved, windows_on_demand = windows_offerings(info, [reserved, on_demand])
    assert windows_reserved == reserved
    assert windows_on_demand.price > on_demand.price
    assert windows_on_demand.estimated


# --- the state table's snapshot: a cold container reads it instead of paging EC2 --------------------


class PagingEc2:
    """DescribeInstanceTypes and DescribeInstanceTypeOfferings as paginators, counting the pages read."""

    def __init__(self, items: dict[str, dict[str, Any]], zones: Any = None) -> None:
        self.items = items
        self.zones = zones or {name: OFFERED.get(name, frozenset(ZONES)) for name in items}
        self.pages = 0

    def get_paginator(self, operation: str) -> Any:
        ec2 = self

        class Paginator:
            def paginate(self, **_: Any) -> Iterator[dict[str, Any]]:
                ec2.pages += 1
                if operation == "describe_instance_types":
                    yield {"InstanceTypes": list(ec2.items.values())}
                else:
                    rows = [
                        {"InstanceType": name, "Location": zone}
                        for name in ec2.items
                        for zone in sorted(ec2.zones[name])
                    ]
                    yield {"InstanceTypeOfferings": rows}

        return Paginator()


class WallClock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def cold_container_catalog(store: Any, ec2: PagingEc2, clock: WallClock) -> Catalog:
    """A Catalog as a new container builds it: no cached catalog, EC2 through the snapshot."""
    clear_caches()
    return Catalog(ec2=ec2, store=store, cache_key=(REGION, None), clock=clock)


def test_a_cold_container_plans_from_the_state_tables_snapshot_without_paging_ec2(primed: None) -> None:
    store, clock = InMemoryStateStore(), WallClock()
    first = PagingEc2(ITEMS)
    paged = cold_container_catalog(store, first, clock).data()
    assert first.pages == 2, "the first container pages EC2 (types and offerings) and keeps a snapshot"

    clock.now += 60
    second = PagingEc2(ITEMS)
    catalog = cold_container_catalog(store, second, clock)
    assert catalog.data().types == paged.types
    assert catalog.data().zones == paged.zones
    assert second.pages == 0, "a young snapshot saves the next cold container every page"
    assert catalog.data().fetched_at == paged.fetched_at  # its age is EC2's answer's, not the read's
    assert {t.name for t in catalog.instance_types(ZONES)} == {
        t.name for t in Catalog(first, store, (REGION, None), loader=lambda _: paged).instance_types(ZONES)
    }


def test_a_snapshot_past_its_age_is_paged_again_and_replaced(primed: None) -> None:
    store, clock = InMemoryStateStore(), WallClock()
    cold_container_catalog(store, PagingEc2(ITEMS), clock).data()
    clock.now += CATALOG_SNAPSHOT_MAX_AGE_SECONDS + 1
    ec2 = PagingEc2({**ITEMS, "m7i.large": ec2_item("m7i.large", 2, 8192, "x86_64")})
    assert "m7i.large" in cold_container_catalog(store, ec2, clock).data().types
    assert ec2.pages == 2
    kept = store.catalog_snapshot(REGION)
    assert kept is not None
    assert kept[1] == clock.now
    later = PagingEc2(ITEMS)
    assert "m7i.large" in cold_container_catalog(store, later, clock).data().types, "the new snapshot"
    assert later.pages == 0


def test_a_snapshot_from_the_future_is_not_trusted(primed: None) -> None:
    store, clock = InMemoryStateStore(), WallClock()
    cold_container_catalog(store, PagingEc2(ITEMS), clock).data()
    clock.now -= 3600  # the wall clock stepped back: the snapshot's age is unknown
    ec2 = PagingEc2(ITEMS)
    cold_container_catalog(store, ec2, clock).data()
    assert ec2.pages == 2


class BrokenStore(InMemoryStateStore):
    def __init__(self, blob: bytes | None = None, *, fail: bool = False) -> None:
        super().__init__()
        self.blob, self.fail = blob, fail

    def catalog_snapshot(self, region: str) -> tuple[bytes, float] | None:
        if self.fail:
            raise RuntimeError("state table unreachable")
        return (self.blob, 1_800_000_000.0) if self.blob is not None else None

    def put_catalog_snapshot(self, region: str, data: bytes, fetched_at: float) -> None:
        if self.fail:
            raise RuntimeError("state table unreachable")


@pytest.mark.parametrize(
    "store",
    [
        BrokenStore(b"not gzip"),
        BrokenStore(__import__("gzip").compress(b'{"version": 999, "types": [], "zones": {}}')),
        BrokenStore(fail=True),
    ],
    ids=["corrupt", "another-version", "unreachable"],
)
def test_a_snapshot_that_cannot_be_used_costs_only_the_paging_it_would_have_saved(
    primed: None, store: BrokenStore, caplog: pytest.LogCaptureFixture
) -> None:
    ec2 = PagingEc2(ITEMS)
    data = cold_container_catalog(store, ec2, WallClock()).data()
    assert set(data.types) == set(ITEMS)
    assert ec2.pages == 2


def test_a_snapshot_round_trips_every_item_and_zone() -> None:
    data = CatalogData(types=ITEMS, zones=OFFERED, fetched_at=12.5)
    back = decode_snapshot(encode_snapshot(data), 12.5)
    assert back == data
    with pytest.raises(ValueError, match="not a catalog snapshot"):
        decode_snapshot(b"\x1f\x8bjunk", 0)
