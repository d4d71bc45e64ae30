"""Reads for the dashboard, one module per page (``runs_list``, ``run_page``, ``compare_page``, ``matrix``,
``stops_page``, ``experiment_page``, ``compare_picker``, ``tools_page``, ``findings_page``) and what several
share (``common``, ``peers``, ``findings``: stored findings and their query, ``rollups``: the scope the
Tools and Findings pages sum, ``prepared``: queries whose SQL is compiled once per process).
Each selector's query count is fixed: it never grows with runs or steps."""
