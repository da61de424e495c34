"""Charts: every series distinguishable (issue 33: a remedy row and its port's defaults shared one colour and one
marker in downstream-k3.png)."""
from harness.report import charts
from harness.method.spans import spread


def test_a_remedy_row_has_its_own_marker_and_line_beside_its_ports_defaults(tmp_path, monkeypatch):
    drawn = {}
    plt = charts._plt()
    real = plt.Axes.errorbar

    def errorbar(self, xs, ys, **kwargs):
        drawn[kwargs["label"]] = (kwargs["fmt"], kwargs["color"])
        return real(self, xs, ys, **kwargs)

    monkeypatch.setattr(plt.Axes, "errorbar", errorbar)
    series = {"spring-platform": [(50, spread([500, 520]))],
              "spring-platform + `SPRING_TASK_EXECUTION_POOL_CORE_SIZE=1200`": [(50, spread([900, 950]))]}
    assert charts.lines(tmp_path / "k3.png", "t", "x", "y", series).exists()
    (plain_fmt, plain_colour), (remedy_fmt, remedy_colour) = drawn.values()
    assert plain_colour == remedy_colour                      # the same port: the same colour
    # the port's own marker, a dashed line (and a hollow marker) for the remedy
    assert plain_fmt != remedy_fmt and remedy_fmt.endswith("--") and not plain_fmt.endswith("--")
