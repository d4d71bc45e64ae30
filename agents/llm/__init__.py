"""Model backends. Every one is reached through the official ``anthropic`` SDK, imported only in this package.

Import what you need from its modules: ``registry`` (the backends' names and ``make_backend``; no SDK
until a backend is built), ``base`` (``ModelBackend``, ``ModelClient``, ``ModelError``), ``simulated``,
``claude`` and ``replay``. This ``__init__`` imports nothing, so a light import stays light.
"""
