"""Names `vulture` (run by `make lint`) cannot see being used, each reviewed: read by a
library, by name, or by a protocol. Anything else it reports is dead code to remove.
This module is only read by vulture; nothing imports it."""

# ruff: noqa: B018

_ = object()

# pydantic reads these: model settings and fields filled from JSON or by keyword
_.model_config  # every BaseModel's configuration
_.assigned_agent, _.in_progress, _.objective  # compiler/formats.py: fields of the seed's todos.json
_.teleportTo, _.next_action, _.completion_reason  # runtime/replies.py: reply fields, discriminators
_.eligible  # compiler/formats.py: a field of `todoflow plan`'s JSON (DryRunLearnCode)
_.retired_at  # runtime/learnings.py: a learning record's field, written to its JSON
# mcp SDK: the argument model, the answer and the tool's published schema it reads
_.model_dump_one_level
_.convert_result  # runtime/serve/mcp.py: the answer of a tool (FuncMetadata)
_.parameters
# tests/support/mcp_tickets.py: the tools its MCP server registers (`@server.tool()`)
_.open_ticket, _.get_ticket, _.echo_env, _.echo_header
# Jinja's sandbox reads the operators it intercepts, and its loader protocol
_.intercepted_binops
_.give_back  # runtime/directive.py: a Reader field, read by the work and sub_agent templates (`reply`)
_.get_source
# Pygments finds a lexer by these class attributes
_.aliases, _.filenames, _.mimetypes
# Lark's lexer state: its parser reads the last token for error reports
_.last_token
# http.server calls the handler's methods by name
_.do_POST
_.log_message
_.close_connection  # read by the server after the handler: the connection is not kept
# python-statemachine calls model conditions by name (`cond="past_end"`)
_.past_end
# the context manager protocol's parameters
_.exc
# pytest and its plugins read these by name
_.pytestmark
_._no_secrets_kept  # an autouse fixture: pytest calls it by being there
_.anyio_backend
_.file_extension  # syrupy's extension attribute
_.pytest_pyfunc_call  # todoflow/pytest_plugin.py: the hook that walks a `todoflow_paths` path
# a module `__getattr__`: the package's lazy attributes
_.__getattr__
