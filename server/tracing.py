"""OpenTelemetry traces, configured only by the standard ``OTEL_*`` environment variables and sent
as OTLP over HTTP: one span per tool call (``memlane.tool recall``), under the MCP SDK's own
``tools/call recall`` span (and so under the client's trace when its request carries one), with a
child per recall stage (``recall.retrieval``: the stage's status and its in and out counts), per
write step (``remember.insert``) and per statement of the store (``db SELECT``, memlane's SQL as
``db.query.text``, never a parameter). No span carries memory text or a query.

Nothing is imported or exported unless ``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set (and neither ``OTEL_SDK_DISABLED=true`` nor
``OTEL_TRACES_EXPORTER=none``); the SDK and the exporter are the ``memlane[otel]`` extra. The
exporter reads the rest (headers, timeout, compression, ``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``) itself.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from memlane.pipeline import telemetry
from memlane.server.version import VERSION

log = logging.getLogger("memlane.server")

ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def configured(env: Mapping[str, str] = os.environ) -> bool:
    """Whether the environment asks for traces."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "none":
        return False
    return any(env.get(k, "").strip() for k in ENDPOINTS)


def configure(exporter: Any = None) -> bool:
    """Send memlane's spans (and the MCP SDK's) where the environment says; ``exporter``: a span
    exporter of the caller's instead (the tests' in-memory one), spans exported as they end. True
    when traces are on."""
    if exporter is None and not configured():
        return False
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    except ImportError:
        log.warning(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set, but OpenTelemetry's SDK is not installed: no traces "
            "(install memlane[otel], e.g. pip install 'memlane[otel]')"
        )
        return False
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        processor: Any = BatchSpanProcessor(OTLPSpanExporter())
    else:
        processor = SimpleSpanProcessor(exporter)
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # the first configuration in this process
        attributes = {"service.version": VERSION}
        if not os.environ.get("OTEL_SERVICE_NAME"):
            attributes["service.name"] = "memlane"
        provider = TracerProvider(resource=Resource.create(attributes))
        trace.set_tracer_provider(provider)  # the MCP SDK's spans go through it too
    provider.add_span_processor(processor)
    telemetry.set_tracer(_Tracer(provider.get_tracer("memlane", VERSION)))
    log.info("OpenTelemetry traces on (OTLP over HTTP)" if exporter is None else "OpenTelemetry traces on")
    return True


class _Span:
    def __init__(self, span: Any) -> None:
        self._span = span

    def set(self, key: str, value: str | int | float | bool) -> None:
        self._span.set_attribute(key, value)


class _Tracer:
    """``telemetry.Tracer`` on an OpenTelemetry tracer. An exception ends the span as an error
    named by its type only: its message may quote what a caller sent."""

    def __init__(self, tracer: Any) -> None:
        self._tracer = tracer

    @contextmanager
    def span(self, name: str, attributes: dict[str, str | int | float | bool]) -> Iterator[_Span]:
        from opentelemetry.trace import Status, StatusCode

        with self._tracer.start_as_current_span(
            name, attributes=attributes, record_exception=False, set_status_on_exception=False
        ) as span:
            try:
                yield _Span(span)
            except BaseException as e:
                span.set_attribute("error.type", type(e).__qualname__)
                span.set_status(Status(StatusCode.ERROR, type(e).__name__))
                raise
