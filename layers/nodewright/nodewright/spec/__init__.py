"""Deployment facts with no CDK in them, shared by the CDK app (``infra/``) and the command-line
tools: what the stack builds from them and what ``nodewright doctor`` checks against, so the two
cannot disagree. Pure data and pure functions: no AWS call, no Kubernetes call.

- ``deployment``: the functions' sizes, timeouts and concurrency, the schedules, the EventBridge
  rules and detail-types, the interruption queue's settings: what ``infra/`` builds, what the
  interruption flow recognises and what the sandbox wires, each defined once.
- ``iam``: the IAM statements each function's role holds, the grants per function, and the
  questions (action, resource, context) that prove a deployed role allows them.
"""
