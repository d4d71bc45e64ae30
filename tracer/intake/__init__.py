"""Every way a run comes in from outside, and the one function where it becomes a ``Run``.

- ``record``: the typed values every source maps to (``Arrival``) and ``runs_record``, the one place
  they are written, through ``tracer.recording``.
- ``errors``: ``IngestError`` and its kin, what a source sent that cannot be recorded, with paths.
- ``schema``: the run document ``rlt.run/1`` (the API's bodies too) and how it maps to an ``Arrival``.
- ``conversation``: a conversation with the model (Messages API blocks) read as steps, shared by
  transcripts and OTLP traces.
- ``transcripts``: Messages transcripts as runs. ``files``: documents, transcripts, JSON arrays and
  JSON Lines imported whole, with a report per item. ``live``: the step API's run, step by step.
- ``otlp``: OpenTelemetry traces (``wire``, ``conventions``, ``receiver``, ``views``).

Nothing is imported here: each module is imported where it is used (``import tracer.intake.otlp``
pulls in no transcript mapping).
"""
