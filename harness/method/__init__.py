"""The measuring method, written once and used by every scenario, the baseline included.

Each module here imports only the standard library and the modules below it in this list (never a scenario,
the report or the bench):

    plan     bench.toml section -> a typed plan dataclass (bench.toml is the only place a value lives)
    rule     the one pass rule: p99 <= [rule] p99_ms + round trips x the added latency, 0 errors, >= 99 % of
             the target achieved, the generator on schedule
    record   the typed records: Step (one constant-rate step), Mst (a confirmed search), Warmup
    spans    "median (min–max)" that keeps ≥, pairwise comparison (A > B only when A's range lies above B's)
    search   one MST search: bracket, bisect, confirm (a rate that passed twice), step down until confirmed
    warmup   one warm-up: windows at a constant rate until CPU per request and p50 agree
    caps     one cap classifier: a limit is named only when it alone explains the result
    runset   which records a table shows: one run set (one commit, one set of settings, one machine)
"""
