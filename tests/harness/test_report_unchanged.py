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


def table_cells(text: str, heading: str) -> list[list[str]]:
    """The rows (header first) of the first table under `heading`, as their cells."""
    import re
    assert f"\n## {heading}\n" in text
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|") and not re.fullmatch(r"\|[-: |]+\|", line)]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", row.strip())[1:-1]] for row in rows]


# internal words a Java engineer does not use, never on the front page
INTERNAL = ("unclear", "caps", "not compared", "one rule", "M1", "M2", "seed", "issue")


def test_the_decision_table_is_short_and_in_plain_words():
    """The front page's decision table: at most 12 regimes, no cell over 160 characters, none of the harness's own
    words; the detail table below it keeps each cell within 220."""
    import re
    text = (ROOT / "RESULTS.md").read_text()
    rows = table_cells(text, "Which model, when")
    assert 1 < len(rows) <= 13                                         # the header and at most 12 regimes
    assert all(len(row) == 5 for row in rows)                          # regime, decides, choose, setting, evidence
    too_long = [(len(cell), cell) for row in rows for cell in row if len(cell) > 160]
    assert not too_long, too_long
    words = [(w, cell) for row in rows for cell in row for w in INTERNAL if re.search(rf"\b{re.escape(w)}\b", cell)]
    assert not words, words
    detail = table_cells(text, "Every regime in detail")
    too_long = [(len(cell), cell) for row in detail for cell in row if len(cell) > 220]
    assert not too_long, too_long


def test_the_answer_is_plain_and_short():
    """RESULTS.md opens with the answer: at most 8 sentences, none of the harness's own words, before the matrix and
    the decision table; the matrix has its chart."""
    import re
    text = (ROOT / "RESULTS.md").read_text()
    heads = [line for line in text.splitlines() if line.startswith("## ")]
    assert heads[:3] == ["## The answer", "## Every port in every regime", "## Which model, when"]
    answer = text.split("\n## The answer\n", 1)[1].split("\n## ", 1)[0].strip()
    sentences = [s for s in re.split(r"(?<=[.])\s+(?=[A-Z])", answer) if s]
    assert 1 <= len(sentences) <= 8, sentences
    assert not [w for w in INTERNAL if re.search(rf"\b{re.escape(w)}\b", answer)]
    assert "](results/charts/matrix.png)" in text


def test_every_section_with_searches_states_their_noise():
    """A section whose runs searched for an MST, beside sections included, says how many of its searches were
    confirmed and how many non-monotonic (and the precision they reached)."""
    text = (ROOT / "RESULTS.md").read_text()
    sections = {part.split("\n", 1)[0]: part for part in text.split("\n## ")[1:]}
    searched = [title for title, body in sections.items() if "MST (req/s)" in body and title != "Every regime in detail"]
    assert len(searched) >= 8, searched
    silent = [t for t in searched if "Search noise: " not in sections[t] or "Search precision: " not in sections[t]]
    assert not silent, silent
