"""Reads for the dashboard, one module per page (``runs_list``, ``run_page``, ``compare_page``, ``matrix``,
``stops_page``, ``experiment_page``, ``compare_picker``, ``findings``) and what several share (``common``, ``peers``). Each
selector's query count is fixed: it never grows with runs or steps."""
