"""Each scenario's part of RESULTS.md, one module per scenario (named as its measuring module in
harness/scenarios/): `render(rs, charts) -> Section | None`, and optionally `render_compose(containers, host)`."""
