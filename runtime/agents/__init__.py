"""What drives a run: a person, a script, a model (with its tools), the `run` loop, and the
learn_code fast path. Agents use the core and the views; they never import `serve`."""
