"""The learn_code fast path of step `convert-all` (examples/fast-path.todoflow): the
`convert` route once per export, in order; todo N is export N. Written once by its
author, never by the runtime; exit 0 means done (the engine still checks the step)."""

import json
import os
import sys
import urllib.request

URL = os.environ["MCP_API_URL"] + "/tools/custom/call_sub_agent"
HEADERS = {"Authorization": f"Bearer {os.environ['MCP_API_TOKEN']}", "Content-Type": "application/json"}
EXPORTS = ["a", "b", "c"]

for number, name in enumerate(EXPORTS, start=1):
    body = {
        "route_id": "convert",
        "todo_id": f"todo_{number}",
        "instructions": f"Convert exports/{name}.json to csv/{name}.csv, then add `{name}` to converted.log.",
    }
    request = urllib.request.Request(URL, json.dumps(body).encode(), HEADERS, method="POST")
    with urllib.request.urlopen(request) as response:
        result = json.load(response)
    if not result["passed"]:
        sys.exit(f"todo_{number} did not pass: {result['reason']}")
    print(f"todo_{number}: {name} converted")
