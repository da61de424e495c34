"""slow-db's pieces its measuring and its report share: the limits a cap names, the medians a cell keeps at its MST,
and what held a cell's MST."""
from . import caps
from .record import Mst
from .spans import num

LIMITS = ("CPU", "pool", "threads", "generator connections")
# the medians at the MST a cell records (the keys of its steps' JSON), each with its format in the appendix
AT_MST = {"app_cpu_us_per_request": num, "proxy_cpu_us_per_request": num, "proxy_cpu_cores": lambda v: num(v, 2),
          "app_rss_mb_peak": num, "app_threads_peak": num}


def latency_of(cell_: dict) -> float:
    return cell_["coords"]["latency_ms"]


def classify(cell_: dict) -> str:
    """What held one cell's MST (caps.cap_at on its utilisations)."""
    return caps.cap_at(Mst.from_json(cell_.get("mst")), cell_.get("utilisation") or {})
