"""Package data: the `.todoflow` grammar (todoflow.lark)."""
