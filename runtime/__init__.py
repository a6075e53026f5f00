"""The runtime: a passive, durable engine that walks a workflow's checklists.

The engine never calls an agent; drivers call it (`todoflow run` with a person or a
scripted agent, the MCP server with any MCP client). Depends on `todoflow.compiler`
(formats, machine, ordering, prompt contexts) and `todoflow.dsl`, never on the AST.
"""

RUN_DIR = ".todoflow/runs"  # where runs live unless told otherwise (a constant the CLI reads cheaply)
