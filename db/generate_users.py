"""Writes the benchmark's users as TSV: realistic British names and places, the same on every run.

Usage: python db/generate_users.py OUT.tsv [COUNT]
"""
import re
import sys

from faker import Faker

SEED = 20240601
DEFAULT_COUNT = 100_000


def users(count: int = DEFAULT_COUNT):
    fake = Faker("en_GB")
    fake.seed_instance(SEED)
    for i in range(count):
        first, last = fake.first_name(), fake.last_name()
        # The index keeps every email unique; names are reduced to [a-z] so emails stay plain ASCII.
        local = f"{re.sub('[^a-z]', '', first.lower())}.{re.sub('[^a-z]', '', last.lower())}{i}"
        yield (f"{local}@example.com", first, last, fake.city(), fake.county(), fake.random_int(18, 90))


def main() -> None:
    out = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else DEFAULT_COUNT
    with open(out, "w", encoding="utf-8") as f:
        for row in users(count):
            f.write("\t".join(map(str, row)) + "\n")


if __name__ == "__main__":
    main()
