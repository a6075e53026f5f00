"""Package data: workflows shipped with todoflow (the built-in `todo-list`)."""
