"""The measuring method, written once and used by every scenario, the baseline included (README.md, "The method:
one harness, one vocabulary"). Each module imports only the standard library and the modules before it in: plan,
rule, spans, record, search, warmup, timeline, caps, runset, table (never a scenario, the report or the bench)."""
