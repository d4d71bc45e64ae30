"""The agent core: tools, errors, policies, the repair loop, model backends and scenarios. No Django here.

Import from the modules themselves; this ``__init__`` imports nothing, so ``import agents.events``
or ``agents.policies`` stays light (no ``anthropic`` SDK, no scenarios) and a lazy import elsewhere
is really lazy:

- ``vocabulary``: stop reasons, step kinds, error categories and formats, retry rules, backend names
- ``events``: what the loop reports, and the ``Recorder`` protocol; ``trace``: those events as text
- ``errors``, ``runner``, ``tools``: failures, validate-then-run, the tools
- ``policies``: the harness policies; ``llm``: the model backends (``llm.registry.make_backend``)
- ``loop``: the repair loop; ``scenarios``: the tasks and their judges
- ``run``: ``run_scenario``, what the tracer and ``python -m agents`` call
"""
