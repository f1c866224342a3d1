"""The dashboard's SVG charts: marks per point, escaped labels, an empty chart that says so."""

import xml.etree.ElementTree as ET

from tuner.web.charts import Point, Rule, Series, _ticks, xy_chart

SVG = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1))


def test_every_point_is_a_mark_inside_the_plot_with_its_error_bar() -> None:
    svg = xy_chart("c", [Series("ngram", [Point(1, 400, 10), Point(2, 450, 0), Point(4, 500, 20)]),
                         Series("draft", [Point(3, 380)], line=False)],
                   "k", "tokens/s", [Rule("baseline 350", 350)])
    root = parse(svg)
    marks = root.findall(f".//{SVG}circle[@class='mark']")
    assert len(marks) == 4
    ys = [float(m.get("cy")) for m in marks[:3]]
    assert ys[0] > ys[1] > ys[2]  # higher tokens/s is drawn higher up
    assert all(60 <= float(m.get("cx")) <= 410 for m in marks)
    assert len(root.findall(f".//{SVG}line[@class='errbar']")) == 2  # zero error draws no bar
    assert len(root.findall(f".//{SVG}polyline")) == 1  # the scatter-only series has no line
    assert root.find(f".//{SVG}line[@class='rule']") is not None


def test_labels_are_escaped() -> None:
    svg = xy_chart("c", [Series("<script>x</script>", [Point(1, 1, 0, "a<b")])], "k & j", "y")
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "k &amp; j" in svg
    parse(svg)  # still well-formed


def test_empty_chart_says_so_and_ticks_cover_the_range() -> None:
    assert "no data yet" in xy_chart("c", [], "x", "y")
    ticks = _ticks(0.13, 0.92)
    assert ticks[0] >= 0.13 and ticks[-1] <= 0.92 + 1e-9 and 3 <= len(ticks) <= 10
