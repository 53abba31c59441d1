"""EKS token format and refresh, and kubeconfig loading errors (pure: presigning makes no network call)."""

from __future__ import annotations

import base64
from urllib.parse import parse_qs, urlparse

import boto3
import pytest
import yaml
from moto import mock_aws
from nodewright.cluster import auth
from nodewright.cluster.errors import ClusterConfigError


def _decode(token: str) -> str:
    body = token.removeprefix(auth.TOKEN_PREFIX)
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()


@pytest.fixture
def sts():
    with mock_aws():
        yield boto3.client("sts", region_name="us-east-1")


def test_token_is_a_presigned_get_caller_identity_signed_over_the_cluster_header(sts) -> None:
    token = auth.eks_token("demo-cluster", sts)

    assert token.startswith("k8s-aws-v1.")
    assert "=" not in token, "base64url without padding"
    url = urlparse(_decode(token))
    query = parse_qs(url.query)
    assert query["Action"] == ["GetCallerIdentity"]
    assert query["X-Amz-Expires"] == ["60"]
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"][0].split(";")
    assert url.netloc.startswith("sts")


def test_token_url_answers_get_caller_identity(sts) -> None:
    import requests

    url = _decode(auth.eks_token("demo-cluster", sts))
    response = requests.get(url, headers={"x-k8s-aws-id": "demo-cluster"}, timeout=5)
    assert response.status_code == 200
    assert "GetCallerIdentityResult" in response.text


def test_cluster_header_handler_does_not_leak_into_other_presigns(sts) -> None:
    auth.eks_token("cluster-a", sts)
    plain = sts.generate_presigned_url("get_caller_identity", Params={}, ExpiresIn=60)
    assert "x-k8s-aws-id" not in parse_qs(urlparse(plain).query)["X-Amz-SignedHeaders"][0]


class _Config:
    def __init__(self) -> None:
        self.api_key: dict[str, str] = {}
        self.api_key_prefix: dict[str, str] = {}


def test_refresher_re_signs_only_after_the_refresh_interval() -> None:
    now = [0.0]
    tokens = iter(["k8s-aws-v1.first", "k8s-aws-v1.second"])
    refresher = auth.TokenRefresher("c", lambda: next(tokens), clock=lambda: now[0])
    config = _Config()

    refresher(config)
    assert config.api_key["authorization"] == "k8s-aws-v1.first"
    assert config.api_key_prefix["authorization"] == "Bearer"
    now[0] = auth.TOKEN_REFRESH_SECONDS - 1
    refresher(config)
    assert config.api_key["authorization"] == "k8s-aws-v1.first"
    now[0] = auth.TOKEN_REFRESH_SECONDS + 1
    refresher(config)
    assert config.api_key["authorization"] == "k8s-aws-v1.second"
    assert auth.TOKEN_REFRESH_SECONDS < auth.TOKEN_LIFETIME_SECONDS


def test_eks_configuration_uses_described_endpoint_ca_and_refresh_hook(sts) -> None:
    from kubernetes.client import ApiClient
    from nodewright.settings import Settings

    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()
    settings = Settings(cluster_name="demo", region="us-east-1")
    config = auth.eks_configuration(
        settings,
        describe=lambda _s: auth.ClusterEndpoint("https://ABC.gr7.us-east-1.eks.amazonaws.com", ca),
        sts_client=sts,
    )
    assert config.host == "https://ABC.gr7.us-east-1.eks.amazonaws.com"
    with open(config.ssl_ca_cert, "rb") as handle:
        assert handle.read().startswith(b"-----BEGIN CERTIFICATE-----")
    # The client asks the hook before every request: the header carries a fresh EKS token.
    headers: dict[str, str] = {}
    ApiClient(config).update_params_for_auth(headers, [], ["BearerToken"], "/api", "GET", None)
    assert headers["authorization"].startswith("Bearer k8s-aws-v1.")


def test_eks_configuration_refuses_a_cluster_without_endpoint(sts) -> None:
    from nodewright.settings import Settings

    with pytest.raises(ClusterConfigError, match="no endpoint"):
        auth.eks_configuration(
            Settings(cluster_name="demo", region="us-east-1"),
            describe=lambda _s: auth.ClusterEndpoint("", ""),
            sts_client=sts,
        )


def test_describe_cluster_goes_through_cloud_eks() -> None:
    from nodewright.cloud.aws import reset_clients
    from nodewright.settings import Settings

    with mock_aws():
        reset_clients()
        iam = boto3.client("iam", region_name="us-east-1")
        role = iam.create_role(RoleName="eks", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        boto3.client("eks", region_name="us-east-1").create_cluster(
            name="demo", roleArn=role, resourcesVpcConfig={"subnetIds": []}
        )
        endpoint = auth._describe_cluster(Settings(cluster_name="demo", region="us-east-1"))
        reset_clients()
    assert endpoint.endpoint.startswith("https://")
    assert endpoint.certificate_authority_data


def test_missing_kubeconfig_names_the_setting(tmp_path) -> None:
    with pytest.raises(ClusterConfigError, match="NODEWRIGHT_KUBECONFIG"):
        auth.kubeconfig_configuration(str(tmp_path / "absent.yaml"))


@pytest.mark.parametrize(
    ("content", "complaint"),
    [
        ("apiVersion: v1\nusers: [{name: a\n", "not valid YAML"),
        (
            "- a\n- b\n",
            "a kubeconfig is a YAML mapping (apiVersion, kind: Config, clusters, users, contexts)",
        ),
        ("kind: Config\nusers: [admin]\n", "users[0] must be a mapping with a name"),
        (
            "kind: Config\nclusters: [{name: a, cluster: 5}]\ncontexts: [{name: c, context: {cluster: a}}]\n"
            "current-context: c\n",
            "clusters[0] (a): cluster must be a mapping",
        ),
        ("kind: Config\n", "current-context"),
        (
            "kind: Config\nclusters: [{name: a, cluster: {server: 5}}]\n"
            "contexts: [{name: c, context: {cluster: a}}]\ncurrent-context: c\n",
            "malformed: AttributeError",
        ),
    ],
    ids=["yaml", "list", "user-string", "cluster-scalar", "no-context", "server-number"],
)
def test_a_malformed_kubeconfig_is_a_config_error_naming_what_is_wrong(tmp_path, content, complaint) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(content)
    with pytest.raises(ClusterConfigError) as failed:
        auth.kubeconfig_configuration(str(path), setting="--kubeconfig")
    message = str(failed.value)
    assert message.startswith(f"cannot load kubeconfig '{path}': ")
    assert complaint in message
    assert message.endswith("; point --kubeconfig at a kubeconfig file")


def kubeconfig_with_user(tmp_path, user: dict) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
                "users": [{"name": "other", "user": {"token": "x"}}, {"name": "u", "user": user}],
                "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "ctx",
            }
        )
    )
    return str(path)


def test_a_kubeconfig_s_as_and_as_groups_become_impersonation_headers_as_kubectl_sends_them(tmp_path) -> None:
    path = kubeconfig_with_user(
        tmp_path, {"token": "t", "as": "nodewright", "as-groups": ["nodewright:autoscaler", "team:a"]}
    )
    configuration = auth.kubeconfig_configuration(path)
    assert auth.impersonation_headers(configuration) == [
        ("Impersonate-User", "nodewright"),
        ("Impersonate-Group", "nodewright:autoscaler"),
        ("Impersonate-Group", "team:a"),
    ]
    plain = auth.kubeconfig_configuration(kubeconfig_with_user(tmp_path, {"token": "t"}))
    assert auth.impersonation_headers(plain) == []


@pytest.mark.parametrize(
    ("user", "complaint"),
    [
        ({"token": "t", "as-groups": ["g"]}, "as-groups without as"),
        ({"token": "t", "as": "u", "as-groups": "g"}, "as-groups must be a list of strings"),
        ({"token": "t", "as": "u", "as-uid": "1"}, "as-uid"),
        ({"token": "t", "as": "u", "as-user-extra": {"k": ["v"]}}, "as-user-extra"),
    ],
    ids=["groups-alone", "groups-string", "uid", "extra"],
)
def test_impersonation_the_client_cannot_send_faithfully_is_a_config_error(tmp_path, user, complaint) -> None:
    with pytest.raises(ClusterConfigError, match=complaint):
        auth.kubeconfig_configuration(kubeconfig_with_user(tmp_path, user))
