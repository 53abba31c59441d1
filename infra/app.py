"""CDK entry point: ``cdk deploy -c clusterName=NAME`` (cdk.json runs ``python -m infra.app``).

Optional context (docs/deploy.md has the table): region, account; nodeRoleName | nodeRoleArn
(an existing node role; otherwise the stack creates one); alarmEmail | alarmTopicArn;
vpcId, subnetIds, securityGroupIds (run the cluster-facing functions in the cluster's VPC);
ebsKmsKeyArns; amiSsmParameters; interruptionMode (replace | event-only), pollInterval (seconds),
architecture (arm64 | x86_64), tracing (true | false), staticCapacity (true | false: static NodePools),
layerAssetDir (a prebuilt layer).
"""

from __future__ import annotations

from aws_cdk import App, Environment

from infra.config import NodewrightConfig
from infra.stack import NodewrightStack, add_nag_checks, stack_name


def build_app(context: dict[str, object] | None = None, outdir: str | None = None) -> App:
    app = App(context=context, outdir=outdir)
    config = NodewrightConfig.from_context(app.node.try_get_context)
    account = app.node.try_get_context("account")
    region = app.node.try_get_context("region")
    # No account/region: an environment-agnostic stack (deploys where the CLI's credentials
    # point); either way synth needs no lookup and no credentials.
    env = Environment(account=account, region=region) if account or region else None
    NodewrightStack(app, stack_name(config.cluster_name), config=config, env=env)
    add_nag_checks(app)
    return app


def main() -> None:
    build_app().synth()


if __name__ == "__main__":
    main()
