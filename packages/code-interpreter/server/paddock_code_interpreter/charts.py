"""A matplotlib figure's data in the shape the code-interpreter SDKs parse as
``Result.chart``: a line, scatter, bar or pie chart (an axes whose artists
are all of one kind), a superchart of several axes, or ``unknown``.

Loaded into the Python kernel by python_startup.py; imports matplotlib only
when a figure is shown.
"""

from __future__ import annotations

import re
from typing import Any

_UNIT = re.compile(r"^(.*?)\s*[\(\[]([^\)\]]+)[\)\]]\s*$")


def _label_and_unit(text: str) -> tuple[str, str | None]:
    m = _UNIT.match(text or "")
    return (m.group(1), m.group(2)) if m else (text or "", None)


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return None
    return value


def _scale(axis: Any, scale: str) -> str:
    from matplotlib import category, dates

    if isinstance(axis.converter, dates.DateConverter) or isinstance(axis.converter, getattr(dates, "_SwitchableDateConverter", ())):
        return "datetime"
    if isinstance(axis.units, category.UnitData):
        return "categorical"
    return scale


def _axis_values(axis: Any, scale: str, values: list[Any]) -> list[Any]:
    """Numbers as the axis shows them: dates as ISO strings, categories by name."""
    if scale == "datetime":
        from matplotlib import dates

        return [dates.num2date(v).isoformat() for v in values]
    if scale == "categorical":
        names = {int(v): k for k, v in axis.units._mapping.items()}
        return [names.get(int(round(float(v))), _plain(v)) for v in values]
    return [_plain(v) for v in values]


def _kind(ax: Any) -> str:
    from matplotlib.collections import PathCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle, Wedge
    from matplotlib.text import Text

    artists = [a for a in ax.get_children() if a in ax.lines or a in ax.collections or a in ax.patches]
    artists = [a for a in artists if not isinstance(a, Text)]
    if not artists:
        return "unknown"
    if all(isinstance(a, Line2D) for a in artists):
        return "line"
    if all(isinstance(a, PathCollection) for a in artists):
        return "scatter"
    if all(isinstance(a, Wedge) for a in artists):
        return "pie"
    if all(isinstance(a, Rectangle) for a in artists):
        return "bar"
    return "unknown"


def _two_d(ax: Any) -> dict[str, Any]:
    x_label, x_unit = _label_and_unit(ax.get_xlabel())
    y_label, y_unit = _label_and_unit(ax.get_ylabel())
    return {"x_label": x_label, "y_label": y_label, "x_unit": x_unit, "y_unit": y_unit}


def _ticks(ax: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, axis, scale in (("x", ax.xaxis, ax.get_xscale()), ("y", ax.yaxis, ax.get_yscale())):
        kind = _scale(axis, scale)
        ticks = list(axis.get_ticklocs())
        out[f"{name}_scale"] = kind
        out[f"{name}_ticks"] = _axis_values(axis, kind, ticks)
        out[f"{name}_tick_labels"] = [t.get_text() for t in axis.get_ticklabels()]
    return out


def _points(ax: Any, kind: str) -> list[dict[str, Any]]:
    x_scale, y_scale = _scale(ax.xaxis, ax.get_xscale()), _scale(ax.yaxis, ax.get_yscale())
    elements = []
    if kind == "line":
        for i, line in enumerate(ax.lines):
            xs = _axis_values(ax.xaxis, x_scale, list(line.get_xdata(orig=False)))
            ys = _axis_values(ax.yaxis, y_scale, list(line.get_ydata(orig=False)))
            elements.append({"label": _series_label(line.get_label(), i), "points": [list(p) for p in zip(xs, ys)]})
    else:
        for i, collection in enumerate(ax.collections):
            offsets = collection.get_offsets()
            xs = _axis_values(ax.xaxis, x_scale, [p[0] for p in offsets])
            ys = _axis_values(ax.yaxis, y_scale, [p[1] for p in offsets])
            elements.append({"label": _series_label(collection.get_label(), i), "points": [list(p) for p in zip(xs, ys)]})
    return elements


def _series_label(label: str, index: int) -> str:
    # matplotlib names unlabelled artists `_child0`, `_line0` ...
    return label if label and not label.startswith("_") else f"series {index}"


def _bars(ax: Any) -> list[dict[str, Any]]:
    from matplotlib.container import BarContainer

    ticks = {round(float(loc), 6): t.get_text() for loc, t in zip(ax.get_xticks(), ax.get_xticklabels())}
    elements = []
    containers = [c for c in ax.containers if isinstance(c, BarContainer)] or [ax.patches]
    for i, container in enumerate(containers):
        group = getattr(container, "get_label", lambda: "")() or ""
        group = group if not group.startswith("_") else f"group {i}"
        for bar in container:
            center = round(float(bar.get_x() + bar.get_width() / 2), 6)
            elements.append({"label": ticks.get(center) or str(_plain(center)), "value": _plain(bar.get_height()), "group": group})
    return elements


def _pie(ax: Any) -> list[dict[str, Any]]:
    return [
        {"label": w.get_label(), "angle": _plain(abs(w.theta2 - w.theta1)), "radius": _plain(w.r)}
        for w in ax.patches
    ]


def axes_to_chart(ax: Any) -> dict[str, Any]:
    kind = _kind(ax)
    chart: dict[str, Any] = {"type": kind, "title": ax.get_title()}
    if kind in ("line", "scatter"):
        chart.update(_two_d(ax), **_ticks(ax), elements=_points(ax, kind))
    elif kind == "bar":
        chart.update(_two_d(ax), elements=_bars(ax))
    elif kind == "pie":
        chart["elements"] = _pie(ax)
    else:
        chart["elements"] = []
    return chart


def figure_to_chart(figure: Any) -> dict[str, Any] | None:
    axes = figure.get_axes()
    if not axes:
        return None
    if len(axes) == 1:
        return axes_to_chart(axes[0])
    title = figure._suptitle.get_text() if figure._suptitle is not None else ""
    return {"type": "superchart", "title": title, "elements": [axes_to_chart(ax) for ax in axes]}
