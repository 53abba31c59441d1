"""Deployment facts with no CDK in them, shared by the CDK app (``infra/``) and the command-line
tools: what the stack builds from them and what ``nodewright doctor`` checks against, so the two
cannot disagree. Pure data and pure functions: no AWS call, no Kubernetes call.

- ``iam``: the IAM statements each function's role holds, the grants per function, and the
  questions (action, resource, context) that prove a deployed role allows them.
"""
