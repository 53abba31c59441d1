"""Both interruption functions end to end on the emulator: partial batch failures and act-once idempotency.

The handlers are loaded as Lambda loads them; the processor they share is pointed at the test's
cluster, a recording cloud and a fake replacement. Idempotency runs on a moto DynamoDB state table
with the stack's schema (pk/sk/expires_at).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import boto3
import pytest
from fakes import FakeLambdaContext
from moto import mock_aws
from nodewright.cloud.aws import reset_clients
from nodewright.cluster import ApiUnavailable
from nodewright.cluster.resources import PODS
from nodewright.interruption import flow, processing

from sandbox.runtime import events

from .interruption_support import INSTANCE, CountingReplacement, owned_nodes


def spot_event(event_id: str = "spot-1", instance: str = INSTANCE) -> dict[str, Any]:
    """A spot warning for ``instance`` whose notice was just given (sandbox.runtime.events; a fixed id)."""
    return {**events.spot_warning(instance, "us-west-2"), "id": event_id}


def sqs_batch(*bodies: str) -> dict[str, Any]:
    """One SQS batch whose message ids are m-0, m-1, ... (what batchItemFailures name)."""
    return events.sqs_event(
        [events.sqs_record(body, message_id=f"m-{i}", region="us-west-2") for i, body in enumerate(bodies)]
    )


@pytest.fixture
def state_table(monkeypatch) -> Any:
    with mock_aws():
        reset_clients()
        ddb = boto3.client("dynamodb", region_name="us-west-2")
        ddb.create_table(
            TableName="nodewright-state",
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        yield ddb
        reset_clients()


@pytest.mark.usefixtures("owned_node")
def test_a_message_the_parser_fails_on_unexpectedly_fails_alone_and_the_batch_goes_on(
    world, make_processor, functions, monkeypatch, capsys
) -> None:
    """A parser bug (an exception other than MalformedMessage) is that message's failure alone: SQS
    redelivers it and, at last, the dead-letter queue holds it; the spot warning beside it in the
    batch is acted on. Failing the whole batch would send every good message of it there too."""
    interruption, _ = functions
    replacement = CountingReplacement()
    interruption.processor = make_processor(replacement, state=False)
    real_parse = processing.parse_message

    def buggy_parse(message: Any, **kwargs: Any) -> Any:
        if "parser-bug" in str(message):
            raise KeyError("detail")  # as a parser bug would
        return real_parse(message, **kwargs)

    monkeypatch.setattr(processing, "parse_message", buggy_parse)
    batch = sqs_batch(
        json.dumps({**spot_event("parser-bug"), "detail-type": "parser-bug"}), json.dumps(spot_event())
    )

    response = interruption.handler(batch, FakeLambdaContext())

    assert response == {"batchItemFailures": [{"itemIdentifier": "m-0"}]}
    assert replacement.calls == [["node-a"]]
    assert world.cluster.find_node("node-a") is None, "the good message's drain ran to the end"
    assert "KeyError" in capsys.readouterr().out, "the parser's failure is logged with its traceback"


@pytest.mark.usefixtures("owned_node")
def test_partial_batch_failure_retries_only_the_transient_message(
    world, make_processor, functions, monkeypatch, capsys
) -> None:
    interruption, _ = functions
    replacement = CountingReplacement()
    interruption.processor = make_processor(replacement, state=False)
    real_owns_any = flow.OwnershipIndex.owns_any

    def flaky_owns_any(index, instance_ids):
        if "i-0dddddddddddddddd" in instance_ids:
            raise ApiUnavailable("API server unreachable (injected)")
        return real_owns_any(index, instance_ids)

    monkeypatch.setattr(flow.OwnershipIndex, "owns_any", flaky_owns_any)
    batch = sqs_batch(
        "this is not json",
        json.dumps({"Event": "autoscaling:TEST_NOTIFICATION", "RequestId": "t-1"}),
        json.dumps(spot_event("spot-owned")),
        json.dumps(spot_event("spot-flaky", instance="i-0dddddddddddddddd")),
        json.dumps(spot_event("spot-foreign", instance="i-0eeeeeeeeeeeeeeee")),
    )

    response = interruption.handler(batch, FakeLambdaContext())

    assert response == {"batchItemFailures": [{"itemIdentifier": "m-3"}]}
    assert replacement.calls == [["node-a"]]
    assert world.cluster.find_node("node-a") is None, "the drain ran to the end after the batch"
    emitted = capsys.readouterr().out
    for metric in (
        "MalformedMessages",
        "IgnoredMessages",
        "InterruptionsHandled",
        "InterruptionHandlingSeconds",
    ):
        assert f'"{metric}"' in emitted, metric
    assert '"Kind":"SpotInterruption"' in emitted


@pytest.mark.usefixtures("owned_node")
def test_same_event_twice_on_the_queue_acts_once(make_processor, functions, state_table, cloud) -> None:
    interruption, _ = functions
    replacement = CountingReplacement()
    interruption.processor = make_processor(replacement, state=True)
    body = json.dumps(spot_event("spot-twice"))

    assert interruption.handler(sqs_batch(body), FakeLambdaContext()) == {"batchItemFailures": []}
    assert interruption.handler(sqs_batch(body), FakeLambdaContext()) == {"batchItemFailures": []}

    assert replacement.calls == [["node-a"]]
    assert cloud.unavailable == [("m5.large", "us-west-2a", "spot", "SpotInterruption")]
    items = state_table.scan(TableName="nodewright-state")["Items"]
    assert [i["pk"]["S"] for i in items] == ["idempotency#nodewright-interruption"]
    assert items[0]["status"]["S"] == "COMPLETED"
    assert int(items[0]["expires_at"]["N"]) > 0


@pytest.mark.usefixtures("owned_node", "state_table")
def test_direct_path_first_then_queue_acts_once(world, make_processor, functions) -> None:
    interruption, spot_events = functions
    replacement = CountingReplacement()
    direct = make_processor(replacement, state=True)
    queue = make_processor(replacement, state=True)  # another container, another function
    spot_events.processor, interruption.processor = direct, queue

    first = spot_events.handler(
        spot_event("spot-both"), FakeLambdaContext(function_name="nodewright-spot-events")
    )
    second = interruption.handler(sqs_batch(json.dumps(spot_event("spot-both"))), FakeLambdaContext())

    assert first["disposition"] == "acted"
    assert second == {"batchItemFailures": []}
    assert replacement.calls == [["node-a"]]
    assert world.cluster.find_node("node-a") is None
    left = world.cluster.find_nodeclaim("default-a")  # deleting until EC2 has reclaimed the instance
    assert left["metadata"]["deletionTimestamp"]


@pytest.mark.usefixtures("owned_node", "state_table")
def test_redelivery_after_the_node_is_gone_is_a_duplicate(world, make_processor, functions) -> None:
    _, spot_events = functions
    replacement = CountingReplacement()
    spot_events.processor = make_processor(replacement, state=True)
    context = FakeLambdaContext(function_name="nodewright-spot-events")

    first = spot_events.handler(spot_event("spot-again"), context)
    assert world.cluster.find_node("node-a") is None, "the node is gone"
    again = spot_events.handler(spot_event("spot-again"), context)
    other = spot_events.handler(spot_event("spot-other"), context)

    assert first["disposition"] == "acted"
    assert again["disposition"] == "duplicate"
    assert again["outcome"] == first["outcome"]
    # Another event for the same instance is not a duplicate: until EC2 has reclaimed the instance
    # its NodeClaim records it, so the termination is resumed (nothing more to do), not redone.
    assert other["disposition"] == "acted"
    assert other["outcome"]["resumed"] == [first["instanceIds"][0]]
    assert replacement.calls == [["node-a"]]


@pytest.mark.usefixtures("owned_node", "state_table")
def test_event_in_progress_on_one_path_is_retried_later_on_the_queue(
    make_processor, functions, monkeypatch
) -> None:
    interruption, spot_events = functions
    replacement = CountingReplacement()
    direct = make_processor(replacement, state=True)
    queue = make_processor(replacement, state=True)
    spot_events.processor, interruption.processor = direct, queue
    seen: dict[str, Any] = {}
    acting = flow.reconcile

    def queue_delivers_meanwhile(*args: Any, **kwargs: Any) -> Any:
        """The queue's copy arrives while the direct path is cordoning (its record in progress)."""
        outcome = acting(*args, **kwargs)
        seen.setdefault(
            "queue", interruption.handler(sqs_batch(json.dumps(spot_event("spot-race"))), FakeLambdaContext())
        )
        return outcome

    monkeypatch.setattr(flow, "reconcile", queue_delivers_meanwhile)
    spot_events.handler(spot_event("spot-race"), FakeLambdaContext(function_name="nodewright-spot-events"))

    assert seen["queue"] == {"batchItemFailures": [{"itemIdentifier": "m-0"}]}, "back to the queue, not lost"
    assert replacement.calls == [["node-a"]]


@pytest.mark.usefixtures("state_table")
def test_a_batch_of_warnings_is_replaced_in_one_pass_before_any_eviction(
    world, make_processor, functions
) -> None:
    """An AZ-wide reclaim delivers ten warnings a batch: one replacement plans the pods of all ten
    nodes, after every one is cordoned and, the lease being free, before the first eviction (not
    ten passes queued on the writers' lease, each re-reading the whole cluster)."""
    interruption, _ = functions
    instances = owned_nodes(world, "b", 4)
    replacement = CountingReplacement()
    seen_at_replacement: dict[str, Any] = {}

    def look() -> None:
        nodes = [world.cluster.find_node(f"node-{i}") for i in range(4)]
        seen_at_replacement["cordoned"] = [bool(n and n["spec"].get("unschedulable")) for n in nodes]
        seen_at_replacement["pods"] = [world.cluster.find(PODS, f"web-{i}", "default") for i in range(4)]

    replacement.during = look
    interruption.processor = make_processor(replacement, state=True)
    batch = sqs_batch(*(json.dumps(spot_event(f"spot-{i}", instance=x)) for i, x in enumerate(instances)))

    answer = interruption.handler(batch, FakeLambdaContext())

    assert answer == {"batchItemFailures": []}
    assert replacement.calls == [["node-0", "node-1", "node-2", "node-3"]]
    assert seen_at_replacement["cordoned"] == [True] * 4
    assert all(
        p is not None and not p["metadata"].get("deletionTimestamp") for p in seen_at_replacement["pods"]
    )
    assert all(world.cluster.find_node(f"node-{i}") is None for i in range(4)), "then drained"


@pytest.mark.usefixtures("owned_node")
def test_an_api_server_lost_after_the_batch_keeps_the_batch_answer(
    make_processor, functions, monkeypatch, capsys
) -> None:
    interruption, _ = functions
    processor = make_processor(CountingReplacement(), state=False)
    interruption.processor = processor

    def down(budget_seconds: float) -> list[dict[str, Any]]:
        raise ApiUnavailable("API server unreachable (injected after the batch)")

    monkeypatch.setattr(processor, "drive", down)

    response = interruption.handler(sqs_batch(json.dumps(spot_event("spot-then-down"))), FakeLambdaContext())

    assert response == {"batchItemFailures": []}, "the message was handled: it must not be redelivered"
    assert not [t for t in threading.enumerate() if t.name == "replacement"], (
        "the drive raised before ending the replacement: the handler ends it (nothing outlives an invocation)"
    )
    out = capsys.readouterr().out
    assert out.count("Kubernetes API server unavailable") == 1
    assert '"ApiServerUnavailable"' in out


@pytest.mark.usefixtures("state_table")
def test_every_node_of_a_batch_is_cordoned_before_its_first_message_is_handled(
    world, make_processor, functions, monkeypatch
) -> None:
    """Each message's whole work (idempotency record, offering, NodeClaim, event) came before the
    next one's cordon: the last node of a batch of ten took new pods for all that time. The
    batch's nodes are cordoned first; the messages are then handled (and acted on) once each."""
    interruption, _ = functions
    instances = owned_nodes(world, "c", 3, with_pods=False)
    world.node("node-other", "i-0aaaaaaaaaaaaacff")  # a Node without a NodeClaim: not ours
    replacement = CountingReplacement()
    interruption.processor = make_processor(replacement, state=True)
    cordoned_at_first_message: list[bool] = []
    acting = flow.reconcile
    first = threading.Lock()  # the batch's messages are handled at once: one looks first

    def first_message_looks(*args: Any, **kwargs: Any) -> Any:
        with first:
            if not cordoned_at_first_message:
                nodes = [world.cluster.find_node(f"node-{i}") for i in range(3)]
                cordoned_at_first_message.extend(bool(n["spec"].get("unschedulable")) for n in nodes)
        return acting(*args, **kwargs)

    monkeypatch.setattr(flow, "reconcile", first_message_looks)
    bodies = [json.dumps(spot_event(f"spot-c{i}", instance=x)) for i, x in enumerate(instances)]
    batch = sqs_batch(
        *bodies,
        json.dumps(spot_event("spot-not-ours", instance="i-0aaaaaaaaaaaaacff")),
        "{malformed",
    )

    answer = interruption.handler(batch, FakeLambdaContext())

    assert answer == {"batchItemFailures": []}
    assert cordoned_at_first_message == [True, True, True]
    assert not world.cluster.find_node("node-other")["spec"].get("unschedulable"), "not ours: untouched"
    assert replacement.calls == [["node-0", "node-1", "node-2"]], "each message acted on once"


@pytest.mark.usefixtures("owned_node", "state_table")
def test_a_replacement_that_finds_the_lease_held_waits_for_it_and_the_drain_does_not_wait(
    world, make_processor, functions
) -> None:
    """In a 100-node storm a replacement that found the writers' lease held was skipped, its pods
    left to the provisioner's next pass up to a minute later, and the holder's own drains waited for
    its follow-up passes. The replacement now waits for the lease beside the drain."""
    _, spot_events = functions
    replacement = CountingReplacement()
    spot_events.processor = make_processor(replacement, state=True)
    provisioner = world.cluster.writer_lease("provisioner", duration_seconds=60)
    assert provisioner.acquire()
    drained_while_held = threading.Event()

    def release_once_drained() -> None:
        """The holder lets go only once the node is drained: the drain did not wait for the lease."""
        for _ in range(600):
            if world.cluster.find_node("node-a") is None:
                drained_while_held.set()
                break
            time.sleep(0.1)
        provisioner.release()

    holder = threading.Thread(target=release_once_drained, daemon=True)
    holder.start()

    answer = spot_events.handler(
        spot_event("spot-held"), FakeLambdaContext(function_name="nodewright-spot-events")
    )
    holder.join(timeout=5)

    assert answer["disposition"] == "acted"
    assert drained_while_held.is_set(), "drained while another writer held the lease"
    assert replacement.calls == [["node-a"]], "planned once the lease was free, not skipped"
    assert answer["outcome"]["replacement"] == {"created": ["replacement-1"]}


@pytest.mark.usefixtures("state_table")
def test_a_batch_replacement_begins_once_its_nodes_are_cordoned_before_its_messages_are_handled(
    world, make_processor, functions, monkeypatch
) -> None:
    """A batch's messages are handled one after another (in a 100-node storm the tenth NodeClaim of
    a batch was marked tens of seconds after the cordon), and its replacement came after the last
    one. It now begins as soon as the batch's nodes are cordoned, beside the messages' handling."""
    interruption, _ = functions
    instances = owned_nodes(world, "d", 3)
    replacement = CountingReplacement()
    planned = threading.Event()
    marked_when_planned: list[bool] = []

    def look() -> None:
        claims = [world.cluster.find_nodeclaim(f"default-{i}") for i in range(3)]
        marked_when_planned.extend(bool(c and c["metadata"].get("deletionTimestamp")) for c in claims)
        planned.set()

    replacement.during = look
    interruption.processor = make_processor(replacement, state=True)
    acting = flow.reconcile

    def after_the_plan(*args: Any, **kwargs: Any) -> Any:
        planned.wait(timeout=10)  # never set when the replacement only comes after the messages
        return acting(*args, **kwargs)

    monkeypatch.setattr(flow, "reconcile", after_the_plan)
    batch = sqs_batch(*(json.dumps(spot_event(f"spot-d{i}", instance=x)) for i, x in enumerate(instances)))

    answer = interruption.handler(batch, FakeLambdaContext())

    assert answer == {"batchItemFailures": []}
    assert marked_when_planned == [False, False, False], "planned before the first message was acted on"
    notices = [
        (world.cluster.find_nodeclaim(f"default-{i}") or {}).get("metadata", {}).get("annotations", {})
        for i in range(3)
    ]
    assert all(flow.NOTICE_ANNOTATION in n for n in notices), "the warning's deadline noted for the holder"
    assert replacement.calls == [["node-0", "node-1", "node-2"]], "one pass for the batch's nodes"
    assert all(world.cluster.find_node(f"node-{i}") is None for i in range(3)), "then drained"


@pytest.mark.usefixtures("state_table")
def test_a_batchs_messages_are_handled_at_once_each_acted_on_once(
    world, make_processor, functions, monkeypatch, capsys
) -> None:
    """One after another, the tenth message of a batch was acted on after the nine before it, and
    the batch's drains began after the last (a 100-node storm: NodeClaims marked p50 87-111 s after
    their warning). Every message of a batch is now in hand at once: none waits for another to be
    acted on before its own NodeClaim is marked. Each is still acted on once, reported on its own,
    and logged under its own event id."""
    interruption, _ = functions
    instances = owned_nodes(world, "e", 3)
    replacement = CountingReplacement()
    interruption.processor = make_processor(replacement, state=True)
    all_in_hand = threading.Barrier(3, timeout=10)  # broken when one waits for another to finish
    acting = flow.reconcile

    def together(*args: Any, **kwargs: Any) -> Any:
        all_in_hand.wait()
        return acting(*args, **kwargs)

    monkeypatch.setattr(flow, "reconcile", together)
    bodies = [json.dumps(spot_event(f"spot-e{i}", instance=x)) for i, x in enumerate(instances)]
    capsys.readouterr()

    answer = interruption.handler(sqs_batch(*bodies, bodies[0]), FakeLambdaContext())

    assert answer == {"batchItemFailures": []}
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    handled = [x for x in lines if x.get("message") == "interruption handled"]
    assert sorted(x["eventId"] for x in handled) == ["spot-e0", "spot-e1", "spot-e2"], "each acted once"
    assert all(x["disposition"] == "acted" for x in handled)
    assert all(x.get("correlation_id") == x["eventId"] for x in handled), "each under its own id"
    duplicates = [x for x in lines if x.get("message") == "event already handled; nothing done again"]
    assert [x.get("correlation_id") for x in duplicates] == ["spot-e0"], "the second copy: a duplicate"
    assert sorted(n for call in replacement.calls for n in call) == ["node-0", "node-1", "node-2"], (
        "planned once"
    )
    assert all(world.cluster.find_node(f"node-{i}") is None for i in range(3)), "then drained"
