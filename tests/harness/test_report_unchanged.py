"""RESULTS.md, RESULTS-appendix.md and the charts regenerate from the committed raw results exactly as committed: a
restructuring of the harness (issue 33: scenarios as data, one record schema read through method/schema.py) must
not change one number or sentence. A change that means to alter the report regenerates and commits it with the
code (`just report`)."""
import os

from harness import report
from harness.paths import ROOT


def test_the_report_regenerates_byte_for_byte(tmp_path):
    charts = tmp_path / "charts"
    charts.mkdir()
    markdown, appendix_path = ROOT / "RESULTS.md", ROOT / "RESULTS-appendix.md"
    text, appendix, shown = report.render(ROOT / "results", markdown, appendix_path, charts)
    here = os.path.relpath(charts, ROOT)
    assert shown
    assert text.replace(f"]({here}/", "](results/charts/") == markdown.read_text()
    assert appendix.replace(f"]({here}/", "](results/charts/") == appendix_path.read_text()
    drawn = sorted(p.name for p in charts.glob("*.png"))
    assert drawn == sorted(p.name for p in (ROOT / "results" / "charts").glob("*.png"))
    for name in drawn:
        assert (charts / name).read_bytes() == (ROOT / "results" / "charts" / name).read_bytes(), name


def test_no_cell_of_the_decision_table_is_longer_than_220_characters():
    """Issue 34: a decision table a reader can use: each row the regime, the ports in order, what decided it in a
    few words, the setting to change; no cell longer than 220 characters (figures and exclusions are the verdict's
    and the sections')."""
    import re
    text = (ROOT / "RESULTS.md").read_text()
    assert "\n## Which model, when\n" in text
    section = text.split("\n## Which model, when\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")
            and not re.fullmatch(r"\|[-: |]+\|", line)]
    assert len(rows) > 1                                               # the header and at least one decision
    cells = [cell.strip() for row in rows for cell in re.split(r"(?<!\\)\|", row.strip())[1:-1]]
    assert len(cells) == 5 * len(rows)                                 # regime, decided by, choice, settings, evidence
    too_long = [(len(cell), cell) for cell in cells if len(cell) > 220]
    assert not too_long, too_long
