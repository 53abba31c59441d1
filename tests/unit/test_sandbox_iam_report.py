"""docs/iam.md's table from recorded IAM decisions (sandbox/iam/report.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandbox.iam import report


def test_each_function_lists_its_actions_with_the_statements_that_allowed_them() -> None:
    def allowed(function: str, action: str, resource: str, statement: str) -> dict[str, str]:
        return {"function": function, "action": action, "resource": resource, "statement": statement}

    records = [
        allowed("disruption", "ec2:CreateFleet", "fleet", "CreateOnlyTagged"),
        allowed("disruption", "ec2:CreateFleet", "subnet", "LaunchWithUsed"),
        allowed("provisioner", "ec2:DescribeSubnets", "*", "RegionalReads"),
        {
            "function": "pricing",
            "action": "ec2:RunInstances",
            "resource": "arn:…:instance/*",
            "denied": "User: … no",
        },
    ]
    text = report.render(records, with_unused=False)
    assert text.index("## provisioner") < text.index("## disruption")  # the functions' order
    assert "| `ec2:CreateFleet` | `fleet`, `subnet` | CreateOnlyTagged, LaunchWithUsed |" in text
    assert "| pricing | `ec2:RunInstances` | `arn:…:instance/*` | User: … no |" in text


def test_no_records_says_how_to_get_them(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="make test"):
        report.write(tmp_path, tmp_path / "iam.md")
    (tmp_path / "a.jsonl").write_text(
        json.dumps({"function": "webhook", "action": "x:Y", "resource": "*", "statement": "S"}) + "\n"
    )
    assert report.read(tmp_path)[0]["function"] == "webhook"
