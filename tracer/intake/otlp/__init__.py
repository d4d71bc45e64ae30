"""OpenTelemetry traces in and out: the OTLP/HTTP receiver at ``/v1/traces`` and the OTLP export of a run.

- ``wire``: the OTLP/HTTP body (protobuf or JSON, gzip) to plain ``Span`` values, and the responses.
- ``conventions``: the spans of one trace, read by OpenInference or GenAI conventions, to a run document.
- ``receiver``: spans stored per trace and each trace's run written through the recording path.
- ``export``: a recorded run as OTLP JSON with GenAI attributes.
- ``views``: the receiver endpoint and the export download.

docs/otlp.md describes what is read and written.
"""
