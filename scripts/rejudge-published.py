"""Issue 34, once: the published records' steps judged again by today's rule, on disk. Until now they were judged
again only when read (method/search.rejudge), so the raw JSON still named the generator for 116 steps that had
failed the port's own p99 or rate. Only a step's `failure` label changes (the rule's port criteria first, the
generator only when it alone failed); every measured number stays. Run from the repository root:
`.venv/bin/python scripts/rejudge-published.py`; it prints what it relabelled."""
import collections
import glob
import json

from harness.method.rule import GENERATOR, Rule

ALIAS = {"baseline-compose": "baseline", "baseline-second-machine": "baseline"}


def relabel(o, rule: Rule, changed: collections.Counter) -> None:
    if isinstance(o, dict):
        if all(k in o for k in ("target_rps", "latency_ms", "achieved_rps", "slo_ms")) and o.get("failure") == GENERATOR \
                and o["target_rps"]:
            if (now := rule.judge(o)) != GENERATOR:
                changed[now] += 1
                o["failure"] = now
        for v in o.values():
            relabel(v, rule, changed)
    elif isinstance(o, list):
        for v in o:
            relabel(v, rule, changed)


def main() -> None:
    published = json.load(open("results/published.json"))
    for key, runs in published.items():
        for run in runs:
            for path in sorted(glob.glob(f"results/{ALIAS.get(key, key)}/{run}/*.json")):
                record = json.load(open(path))
                rule = Rule.from_settings(record["environment"]["settings"])
                changed = collections.Counter()
                relabel(record, rule, changed)
                if changed:
                    with open(path, "w") as f:
                        json.dump(record, f, indent=1)         # the records' own layout: only the labels differ
                    print(path, dict(changed))


if __name__ == "__main__":
    main()
