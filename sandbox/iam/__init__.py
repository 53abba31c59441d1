"""The sandbox enforces IAM as AWS does: every AWS request a function signs is evaluated against
that function's own role as ``cdk synth`` produces it from ``infra/``.

``policies`` (the synthesized roles, cached; each function's identity), ``evaluator``
(``@cloud-copilot/iam-simulate`` in a Node.js process), ``authorization`` (what AWS authorizes for
one API call: the model), ``requests`` (reading a signed request), ``denials`` (a refusal in each
service's own shape), ``enforcement`` (the moto middleware and the decisions), ``report``
(``docs/iam.md``). ``docs/architecture.md`` ("The sandbox") says why each is as it is.
"""
