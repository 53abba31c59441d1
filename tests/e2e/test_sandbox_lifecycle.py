"""The sandbox starts in under 5 s and stops leaving no thread, port or file behind; the CLI runs it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest

from sandbox import Sandbox
from sandbox.apiserver import ApiServer
from sandbox.cluster import AUTOSCALER_GROUP, AUTOSCALER_USER, SandboxError
from sandbox.shared_data import REPO_ROOT
from sandbox.simulators.kube import Kube, core

pytestmark = [pytest.mark.e2e]


def port_open(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def settled_threads(before: set[threading.Thread], timeout: float = 3.0) -> set[str]:
    """Threads still alive that were not there before (request threads may take a moment to end)."""
    deadline = time.monotonic() + timeout
    while True:
        extra = {t.name for t in threading.enumerate() if t not in before and t.is_alive()}
        if not extra or time.monotonic() > deadline:
            return extra
        time.sleep(0.05)


def test_starts_and_stops_without_leftovers() -> None:
    """Start-up time is a benchmark figure (`nodewright bench sandbox`), not a timed assertion."""
    before = set(threading.enumerate())
    sandbox = Sandbox(cluster_name="hygiene", boot_delay=0.5)
    sandbox.start()
    try:
        assert sandbox.startup_seconds > 0
        assert all(loop.running for loop in sandbox.loops)
        ports = [urlparse(sandbox.aws_endpoint).port, urlparse(sandbox.apiserver.url).port]
        assert all(port_open(p) for p in ports)
        kubeconfig = sandbox.kubeconfig_path
        assert kubeconfig.is_file()
        with pytest.raises(SandboxError, match="already running"):
            Sandbox(cluster_name="second").start()
    finally:
        sandbox.stop()
    assert not any(port_open(p) for p in ports)
    assert not kubeconfig.exists()
    assert settled_threads(before) == set()
    sandbox.stop()  # a second stop is harmless


def test_a_second_sandbox_starts_clean_and_can_use_another_api_server(tmp_path: Path) -> None:
    with Sandbox(cluster_name="first") as first:
        ec2 = first.aws_client("ec2")
        ec2.run_instances(
            ImageId=first.aws.images["al2/x86_64"], MinCount=1, MaxCount=1, InstanceType="t3.micro"
        )
        ec2.close()
    with ApiServer() as external:  # any API server: the sandbox's emulator stays off
        kubeconfig = external.write_kubeconfig(tmp_path / "kubeconfig")
        with Sandbox(cluster_name="second", kubeconfig=kubeconfig) as second:
            assert second.apiserver is None
            assert second.kubeconfig_path == kubeconfig
            ec2 = second.aws_client("ec2")
            try:
                reservations = ec2.describe_instances()["Reservations"]
                tag = [{"Name": "tag:karpenter.sh/discovery", "Values": ["first"]}]
                vpcs = ec2.describe_vpcs(Filters=tag)["Vpcs"]
            finally:
                ec2.close()
            kube = Kube(second.api_client())
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c"}]},
            }
            pod["spec"]["containers"][0]["image"] = "pause:3.9"
            kube.create(core("pods", "default"), pod)
            deadline = time.monotonic() + 10
            while not kube.get(core("pods", "default", "p"))["status"].get("conditions"):
                assert time.monotonic() < deadline, (
                    "the sandbox's scheduler never saw the external server's pod"
                )
                time.sleep(0.1)
            [condition] = kube.get(core("pods", "default", "p"))["status"]["conditions"]
            functions_identity = functions_acting_on(second)
        assert kubeconfig.is_file()  # the caller's file: the sandbox leaves it alone
    assert reservations == []
    assert vpcs == []
    assert condition["message"] == "no nodes available to schedule pods"
    # The functions act as deploy/rbac.yaml's identity there too (impersonated with the
    # kubeconfig's credentials), so that server checks their permissions, not the administrator's.
    user, groups, refused = functions_identity
    assert user == AUTOSCALER_USER
    assert AUTOSCALER_GROUP in groups
    assert f'User "{AUTOSCALER_USER}" cannot create resource "nodes"' in refused


def functions_acting_on(sandbox: Sandbox) -> tuple[str, list[str], str]:
    """(user, groups) the API server sees for the functions' kubeconfig, and its answer to a
    write deploy/rbac.yaml does not grant (creating a Node)."""
    from kubernetes.client import ApiClient
    from nodewright.cluster import ApiError, Cluster, auth

    cluster = Cluster(ApiClient(auth.kubeconfig_configuration(sandbox.env()["NODEWRIGHT_KUBECONFIG"])))
    try:
        review = cluster.request(
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        )
        try:
            cluster.request("POST", "/api/v1/nodes", body={"metadata": {"name": "not-granted"}})
            refused = ""
        except ApiError as exc:
            refused = exc.message
    finally:
        cluster.api_client.close()
    info = review["status"]["userInfo"]
    return info["username"], info.get("groups", []), refused


def test_cli_sandbox_up_prints_how_to_reach_it_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    # The sandbox's folder (nodewright-sandbox-<cluster> in the temp folder) is the test's own: two
    # suites on one machine each ran a sandbox 'cli', and one's stop removed the other's folder.
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(tmp_path)}
    process = subprocess.Popen(
        [
            Path(sys.executable).with_name("nodewright"),
            "sandbox",
            "up",
            "--cluster-name",
            "cli",
            "--no-crds",
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    lines: list[str] = []
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("Ctrl-C to stop."):
                break
        output = "".join(lines)
        assert "kubeconfig:" in output, output
        assert "moto endpoint: http://127.0.0.1:" in output, output
        assert "export STATE_TABLE=nodewright-cli-state" in output
        assert "export KUBECONFIG=" in output
        assert "their logs: " in output
        moto_port = urlparse(output.split("moto endpoint: ")[1].split()[0]).port
        assert port_open(moto_port)
        # The other sandbox commands find it by its cluster name.
        nodewright = Path(sys.executable).with_name("nodewright")
        found = subprocess.run(
            [nodewright, "sandbox", "kubeconfig", "--cluster-name", "cli"],
            capture_output=True,
            text=True,
            check=False,
            env=env,
        )
        assert found.returncode == 0
        assert Path(found.stdout.strip()).is_file()
        missing = subprocess.run(
            [nodewright, "sandbox", "interrupt", "no-such-node", "--cluster-name", "cli"],
            capture_output=True,
            check=False,
            env=env,
            text=True,
        )
        assert missing.returncode == 2
        assert "node 'no-such-node' not found" in missing.stderr
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert "stopped." in out
    assert not port_open(moto_port)
    gone = subprocess.run(
        [Path(sys.executable).with_name("nodewright"), "sandbox", "kubeconfig", "--cluster-name", "cli"],
        capture_output=True,
        check=False,
        env=env,
        text=True,
    )
    assert gone.returncode == 2
    assert "no sandbox 'cli' is running" in gone.stderr


@pytest.mark.parametrize(
    ("content", "complaint"),
    [(b"- a\n- b\n", "a kubeconfig is a YAML mapping"), (b"\xff\xfe", "not UTF-8 text")],
    ids=["list", "binary"],
)
def test_demo_with_an_unusable_kubeconfig_is_one_line_and_leaves_nothing_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, complaint: str
) -> None:
    from nodewright.cli import main

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_bytes(content)
    before = set(threading.enumerate())

    assert main(["demo", "--kubeconfig", str(kubeconfig)]) == 2

    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"nodewright demo: cannot load kubeconfig '{kubeconfig}': "), line
    assert complaint in line
    assert settled_threads(before) == set()
