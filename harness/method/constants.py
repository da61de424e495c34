"""The method's constants that are not settings (every other knob is in bench.toml). Each is a property of
the method or of the tools, not of a scenario or a machine: changing one changes what every published figure means,
so it is changed here, with its reason, and the published runs are re-judged or re-measured. Imports nothing."""

# --- the pass rule and the search ----------------------------------------------------------------------------------
# The default floor of a search and of the warm-up's back-off (a scenario with slower requests declares its own,
# mst_floor_rps), and the least rate a scenario derives from a fraction of an MST.
MIN_RATE = 100

# --- caps: what limits an MST (method/caps.py) ---------------------------------------------------------------------
NEAR = 0.8      # at >= 80 % of a limit, queueing at p99 <= SLO eats the rest
CLEAR = 0.6     # below 60 % a limit is clearly not reached
# A limit met exactly reads a little above 1 (its inputs are medians: 1.004 for a pool of 16 at +50 ms); more than
# 5 % above, the MST passed where the model says it cannot, so the model does not describe the run.
EXCEEDED = 1.05
# A bound whose own gauge reads at least this share of it at the MST held the port there: such a port is named with
# its bound, never ranked as a model (a row compares models only where no bound binds).
BOUND_HELD = 0.9

# --- the warm-up (method/warmup.py) --------------------------------------------------------------------------------
# Two windows agree on p50 within the tolerance or within this many ms (an absolute floor for sub-ms p50s).
P50_FLOOR_MS = 0.05
BACK_OFF = 0.7  # a cold JVM that fails the warm-up's rate goes on at 70 % of it
DRAIN_S = 2.0   # the pause after a failed warm-up window when the caller gives no drain of its own
# A warm-up declared settled whose last window cost more than this x the JVM's lowest app CPU per request in its
# passing search steps was still warming: figures taken right after it are not warm.
SETTLED_HOT = 2.0

# --- draining a queue (target.py) ----------------------------------------------------------------------------------
DRAIN_MAX_S = 60.0   # a queue that takes longer than this is the port's own state, reported by the next step
DRAIN_POLL_S = 0.2

# --- the generator (loadgen.py) ------------------------------------------------------------------------------------
TIMEOUT_S = 10    # a slower answer is an error (wrk's default 2 s would hide slow answers as errors sooner)
BUSY_LIMIT = 0.9  # openloop: a generator thread busy more than this share of the step is saturated
