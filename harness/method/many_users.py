"""What many-users' measuring and its report both say: the connection counts, as a list."""


def listed(counts: list[int]) -> str:
    return ", ".join(f"{n:,}" for n in counts)
