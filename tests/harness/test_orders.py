"""An order of ports joins two with "≈" only when their ranges overlap: every group of a printed order is pairwise
tied, over every order the published report generates; a port that overlaps two that lie apart is named apart."""
from harness import report
from harness.method import spans
from harness.method.spans import Spread
from harness.paths import ROOT
from harness.report import table


def test_a_port_between_two_that_lie_apart_is_named_apart_not_chained():
    items = {"a": Spread(15, 11, 20, 3), "b": Spread(10, 8, 12, 3), "c": Spread(5, 0, 10, 3)}
    assert spans.compare(items["a"], items["c"]) == ">"
    assert table.order(items) == "a > c; not placed: b (overlaps both a and c, which lie apart)"
    assert table.ranked(items) == "a > c; not compared: b (overlaps two that lie apart)"
    tied = {"a": Spread(10, 8, 12, 3), "b": Spread(9, 7, 11, 3), "c": Spread(1, 0, 2, 3)}
    assert table.order(tied) == "a ≈ b > c"


def test_no_approx_in_the_report_joins_two_ports_whose_ranges_do_not_overlap(monkeypatch, tmp_path):
    seen = []
    real = table.groups

    def recording(items, higher_is_better=True):
        text = real(items, higher_is_better)
        seen.append((items, higher_is_better, text))
        return text
    monkeypatch.setattr(table, "groups", recording)
    charts = tmp_path / "charts"
    charts.mkdir()
    report.render(ROOT / "results", ROOT / "RESULTS.md", ROOT / "RESULTS-appendix.md", charts)
    assert len(seen) > 10
    for items, higher_is_better, text in seen:
        for group in text.split(" > "):
            names = group.split(" ≈ ")
            apart = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]
                     if spans.compare(items[a], items[b], higher_is_better) in (">", "<")]
            assert not apart, (text, apart)
