"""Recorded runs going out: ``document`` (run documents, ``rlt.run/1``, and JSON Lines of them) and
``otlp`` (a run as an OTLP trace with GenAI attributes). Each module is imported where it is used."""
