"""Package data: the `.todoflow` grammar (todoflow.lark), and the LALR tables the fast
parse reads (todoflow.tables.json, written from the grammar by `dsl.grammar`)."""
