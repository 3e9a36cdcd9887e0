"""The benchmark tool: `python -m tools.bench.run_all` measures, keeps the results in tools/bench/last_run/, and writes
docs/benchmarks.md and the performance block of docs/deployment.md.

One job per module:

* parts, each a process writing JSON: `engine` (the engine on one core), `tokens` (what a model reads),
  `server` (ours against the echo floor: `replay` drives `/ws`; `load`, `memory` and `cpu` measure);
* servers: `launch` starts uvicorn (shared with tests/live_server.py), `_uvicorn_wrap` instruments it,
  `echo_app` is the baseline;
* shared: `common` (workload, statistics, pinning, machine), `profiles` (cProfile rows and categories);
* output: `goals` (every threshold, once), `report` and `report_server` (the Markdown), `notes`,
  `readme` (the performance block of docs/deployment.md), `markdown` (formats and tables).
"""
