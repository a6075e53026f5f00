"""Live traces: the spans of a run (`views.trace`) exported through the OpenTelemetry SDK
while a driver drives it (`todoflow run --trace otlp`, or `$OTEL_EXPORTER_OTLP_ENDPOINT`
set). The `otel` extra installs the SDK.

A span is exported once it has ended: after each step the driver hands the trace the
entries committed since, and the trace exports the spans they end. A resumed run replays
what was traced before without exporting it again; its ids are derived from the process,
so the spans of one run, exported by several invocations, form one trace. `otlp` posts
OTLP/JSON to `$OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (or `$OTEL_EXPORTER_OTLP_ENDPOINT` +
`/v1/traces`; default `http://localhost:4318/v1/traces`) with `$OTEL_EXPORTER_OTLP_HEADERS`;
an export that fails is said once on stderr and never stops the run.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from todoflow.dsl.diagnostics import TodoflowError

from ..engine import Engine
from ..views.trace import SCOPE, Span, Spans, otlp_json

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter

DEFAULT_ENDPOINT = "http://localhost:4318/v1/traces"
TIMEOUT_S = 10.0


class TraceError(TodoflowError):
    """Tracing that cannot be set up (the SDK missing), said before the run starts."""


def tracing_wanted(option: str | None, environ: Mapping[str, str] = os.environ) -> bool:
    """`--trace otlp`, or an OTLP endpoint in the environment."""
    return option == "otlp" or bool(
        environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )


def otlp_exporter(environ: Mapping[str, str] = os.environ, err: TextIO = sys.stderr) -> SpanExporter:
    """The SDK exporter `--trace otlp` uses: OTLP/JSON over HTTP to the configured endpoint."""
    try:
        from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
    except ImportError:
        raise TraceError("tracing needs the OpenTelemetry SDK: pip install 'todoflow[otel]'") from None

    endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or (
        environ["OTEL_EXPORTER_OTLP_ENDPOINT"].rstrip("/") + "/v1/traces"
        if environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        else DEFAULT_ENDPOINT
    )
    headers = {"Content-Type": "application/json", **_headers(environ.get("OTEL_EXPORTER_OTLP_HEADERS", ""))}

    class OtlpJsonExporter(SpanExporter):
        said = False

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            if not spans:
                return SpanExportResult.SUCCESS
            body = json.dumps(_request(spans)).encode()
            try:
                request = urllib.request.Request(endpoint, body, headers, method="POST")
                with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
                    answer.read()
            except (OSError, ValueError) as error:
                if not self.said:
                    print(f"todoflow: warning: traces not exported to {endpoint}: {error}", file=err)
                    self.said = True
                return SpanExportResult.FAILURE
            return SpanExportResult.SUCCESS

    return OtlpJsonExporter()


def _headers(text: str) -> dict[str, str]:
    """`k1=v1,k2=v2` (values URL-encoded), as the OTLP exporter variables write headers."""
    found = {}
    for pair in text.split(","):
        key, sep, value = pair.partition("=")
        if sep and key.strip():
            found[key.strip()] = urllib.parse.unquote(value.strip())
    return found


class LiveTrace:
    """The spans of one run, exported as they end."""

    def __init__(self, engine: Engine, exporter: SpanExporter, content: bool = False) -> None:
        self.engine, self.exporter = engine, exporter
        self.spans = Spans(engine.plan, engine.process_id, engine.store.started_at, content)
        self.seen = engine.directive().state.seq
        self.spans.feed(engine.store.entries())  # traced before: not exported again

    def update(self) -> None:
        """Export the spans the entries committed since the last look have ended."""
        entries = self.engine.store.entries(self.seen)
        if not entries:
            return
        self.seen = entries[-1].seq
        self._export(self.spans.feed(entries))

    def close(self) -> None:
        """What is left to export; spans still open end in a later invocation."""
        self.update()
        self.exporter.shutdown()

    def _export(self, spans: list[Span]) -> None:
        if spans:
            self.exporter.export([readable(span, self.engine.process_id) for span in spans])


def readable(span: Span, process_id: str) -> ReadableSpan:
    """A span as the SDK's exporters take it."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

    from ..views.trace import trace_id

    trace = int(trace_id(process_id), 16)

    def context(span_id: str) -> SpanContext:
        return SpanContext(
            trace, int(span_id, 16), is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED)
        )

    return ReadableSpan(
        name=span.name,
        context=context(span.span_id),
        parent=context(span.parent_id) if span.parent_id else None,
        resource=Resource.create({"service.name": "todoflow"}),
        attributes=dict(span.attributes),
        kind=SpanKind.INTERNAL,
        status=Status(StatusCode.ERROR if span.failed else StatusCode.OK),
        start_time=span.start_ns,
        end_time=span.end_ns,
        instrumentation_scope=InstrumentationScope(SCOPE),
    )


def _request(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """OTLP/JSON of SDK spans (one run's: they share a trace)."""
    from ..views.trace import Span

    first = spans[0].context
    assert first is not None
    ours = [
        Span(
            s.name,
            format(s.context.span_id, "016x") if s.context else "",
            format(s.parent.span_id, "016x") if s.parent else None,
            s.start_time or 0,
            s.end_time or 0,
            dict(s.attributes or {}),  # type: ignore[arg-type]
            s.status.status_code.name == "ERROR",
        )
        for s in spans
    ]
    return otlp_json(ours, format(first.trace_id, "032x"))
