// The sandbox's IAM policy evaluator: @cloud-copilot/iam-simulate behind JSON lines on stdin/stdout.
// One process per sandbox (sandbox/iam/evaluator.py starts it). Requests, one JSON object a line:
//   {"id": 1, "op": "policies", "principal": "<arn>", "policies": [{"name": "...", "policy": {...}}]}
//   {"id": 2, "op": "decide", "principal": "<arn>", "requests": [
//       {"action": "ec2:CreateFleet", "resource": "<arn or *>", "account": "<id>", "context": {...}}]}
// Answers carry the same id: {"id": 2, "results": [{"result": "Allowed", "grants": [...], "ignored": [...]}]}
// or {"id": n, "error": "..."}.
'use strict';
const path = require('node:path');
const readline = require('node:readline');
const { runSimulation, getGrantReasons } = require('@cloud-copilot/iam-simulate');
const { loadPolicy } = require('@cloud-copilot/iam-policy');
// The core engine, for the one case runSimulation's input validation refuses (see accountless).
const engineDir = path.dirname(require.resolve('@cloud-copilot/iam-simulate'));
const { authorize } = require(path.join(engineDir, 'core_engine', 'CoreSimulatorEngine.js'));
const { AwsRequestImpl } = require(path.join(engineDir, 'request', 'request.js'));
const { RequestContextImpl } = require(path.join(engineDir, 'requestContext.js'));
const { DiscoveryContextKeyConstraints } = require(path.join(engineDir, 'context_keys', 'discoveryContextKeyConstraints.js'));

const policies = new Map();

async function decide(principal, request, identityPolicies) {
  const outcome = await runSimulation(
    {
      request: {
        principal,
        action: request.action,
        resource: { resource: request.resource, accountId: request.account },
        contextVariables: request.context || {},
      },
      identityPolicies,
      serviceControlPolicies: [],
      resourceControlPolicies: [],
      ...(request.resourcePolicy ? { resourcePolicy: request.resourcePolicy } : {}),
    },
    { simulationMode: 'Strict' },
  );
  if (outcome.resultType === 'error') {
    if (outcome.errors.message === 'no.resource.types' && request.resource.split(':')[4] === '') {
      return accountless(principal, request, identityPolicies);
    }
    return { result: 'Error', error: JSON.stringify(outcome.errors) };
  }
  const single = outcome.resultType === 'single' ? outcome.result : outcome.results[0];
  const grants = outcome.overallResult === 'Allowed' && single ? getGrantReasons(single.analysis) : [];
  return {
    result: outcome.overallResult,
    grants: grants.map((g) => ({ policy: g.policyIdentifier || g.policyType, sid: g.statementId || null, index: g.statementIndex })),
    ignored: (single && single.ignoredContextKeys) || [],
  };
}

// AWS names some resources with no account (SSM's public parameters, arn:aws:ssm:<region>::parameter/aws/service/...),
// which the reference's ARN pattern for the type (with ${Account}) does not match, so runSimulation
// cannot tell the resource type. The same evaluation, without that validation step.
function accountless(principal, request, identityPolicies) {
  const analysis = authorize({
    request: new AwsRequestImpl(
      principal,
      { resource: request.resource, accountId: request.account },
      request.action,
      new RequestContextImpl(request.context || {}),
    ),
    sessionPolicy: undefined,
    identityPolicies: identityPolicies.map((p) => loadPolicy(p.policy, { name: p.name })),
    serviceControlPolicies: [],
    resourceControlPolicies: [],
    resourcePolicy: undefined,
    permissionBoundaries: undefined,
    vpcEndpointPolicies: undefined,
    simulationParameters: { simulationMode: 'Strict', discoveryContextKeyConstraints: new DiscoveryContextKeyConstraints([]) },
    serviceSettings: { s3: {} },
  });
  const grants = analysis.result === 'Allowed' ? getGrantReasons(analysis) : [];
  return {
    result: analysis.result,
    grants: grants.map((g) => ({ policy: g.policyIdentifier || g.policyType, sid: g.statementId || null, index: g.statementIndex })),
    ignored: [],
  };
}

async function handle(message) {
  if (message.op === 'policies') {
    policies.set(message.principal, message.policies);
    return { id: message.id, ok: true };
  }
  if (message.op === 'decide') {
    const identityPolicies = policies.get(message.principal);
    if (!identityPolicies) {
      return { id: message.id, error: `no policies registered for ${message.principal}` };
    }
    const results = [];
    for (const request of message.requests) {
      results.push(await decide(message.principal, request, identityPolicies));
    }
    return { id: message.id, results };
  }
  return { id: message.id, error: `unknown op ${message.op}` };
}

const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on('line', (line) => {
  let message;
  try {
    message = JSON.parse(line);
  } catch (error) {
    process.stdout.write(JSON.stringify({ id: null, error: `not JSON: ${error}` }) + '\n');
    return;
  }
  handle(message)
    .catch((error) => ({ id: message.id, error: String(error && error.stack ? error.stack : error) }))
    .then((answer) => process.stdout.write(JSON.stringify(answer) + '\n'));
});
process.stdout.write(JSON.stringify({ id: 0, ready: true }) + '\n');
