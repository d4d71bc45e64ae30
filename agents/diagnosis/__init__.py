"""Diagnosis: the lessons' mistakes found in one run, from any source, with what to change and its cost.

``rules.diagnose`` reads a run as the loop reports it (``RunStart``, its ``StepEvent``s, ``RunEnd``)
and returns its ``Finding``s; ``kinds`` is the table of what can be found and which lesson says so,
``calls`` reads a run as the calls the model sent, ``effects`` what a tool changes, ``lint`` what a
failure message says and a rewrite of it, ``report`` findings as text. Pure Python: no Django, no
model SDK; the same code judges runs executed here and runs from outside.
"""
