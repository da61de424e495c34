"""queries' pieces its measuring and its report share: the pool's limit at N lookups per request, a latency's name."""


def pool_limit(n: int, latency_ms: float, pool: int, trips: int = 1) -> float | None:
    """Req/s the pool allows when each of N lookups holds a connection `trips` round trips (None on loopback)."""
    return pool * 1000.0 / (n * trips * latency_ms) if latency_ms > 0 else None


def where(latency: float) -> str:
    return "loopback" if not latency else f"{latency:g} ms"
