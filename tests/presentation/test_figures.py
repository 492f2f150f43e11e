"""autotune.presentation.figures: figure files without pyplot, and a placeholder that says why."""

from __future__ import annotations

from autotune.presentation.figures import Figure, placeholder, save, thousands

PNG = b"\x89PNG\r\n\x1a\n"


def test_a_placeholder_is_a_real_png_so_no_link_points_nowhere(tmp_path):
    path = placeholder(tmp_path / "empty.png", "History", "No trial finished.")
    # Rule: the placeholder is written where the figure would be, as a PNG.
    assert path == tmp_path / "empty.png" and path.read_bytes().startswith(PNG)


def test_save_writes_the_figure_and_thousands_formats_the_y_axis(tmp_path):
    fig = Figure()
    ax = fig.subplots()
    ax.plot([0, 1], [0, 12345])
    thousands(ax)
    # Rule: y tick labels carry thousands separators.
    assert ax.yaxis.get_major_formatter()(12345.0, 0) == "12,345"
    # Rule: save returns the path it wrote, a PNG.
    assert save(fig, tmp_path / "f.png").read_bytes().startswith(PNG)
