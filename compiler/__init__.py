"""The compiler: AST -> checked workflow -> artifacts (plan.json, step_config.json,
the python-statemachine machine, diagrams, resolved prompts, JSON Schemas).

Depends on `todoflow.dsl`; nothing here reads or writes files except `artifacts.write`
and the prompt loader reading `prompt ... from` templates.
"""
