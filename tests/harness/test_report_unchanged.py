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
