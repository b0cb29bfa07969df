"""Tables whose ids and numbers are never cut: on 80 columns and no terminal (a pipe, CI, a
notebook) rich fits a table to the width by cutting cells ("teamtr/NaiveSequentia…") and
splitting headers mid-word ("weight s"). Here id and number columns keep their whole text
(:func:`add_whole_column`), prose columns wrap at spaces (:func:`add_prose_column`), and a
table whose whole columns alone are wider than the console is printed wider rather than cut
(:func:`print_whole`)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

__all__ = ["PROSE_MIN_WIDTH", "add_prose_column", "add_whole_column", "print_whole"]

PROSE_MIN_WIDTH = 12
"""The narrowest a prose column is given before a table is printed wider than the console."""


def add_whole_column(table: Table, header: str, **options: Any) -> None:
    """A column whose cells and header are never wrapped, cut or shortened with an ellipsis
    (ids, names, numbers): ``no_wrap=True``, and ``overflow="fold"`` for rich's last resort."""
    table.add_column(header, no_wrap=True, overflow="fold", **options)


def add_prose_column(table: Table, header: str, **options: Any) -> None:
    """A column of prose (a description): wrapped at spaces, a word longer than the column
    folded onto the next line, never cut with an ellipsis."""
    table.add_column(header, overflow="fold", **options)


def print_whole(console: Console, table: Table) -> None:
    """Prints ``table`` within the console's width when its whole columns fit with
    :data:`PROSE_MIN_WIDTH` (or the column's ``min_width``, if larger) for each other column
    (rich narrows those); else at that width, wider than the console and uncut, so that no id
    or number loses a character."""
    wide = console.options.update_width(10_000)
    natural = Measurement.get(console, wide, table).maximum
    widths = [_widest(console, column) for column in table.columns]
    borders = natural - sum(widths)  # the table's edges, dividers and padding
    needed = borders + sum(
        w if column.no_wrap else max(min(w, PROSE_MIN_WIDTH), column.min_width or 0)
        for w, column in zip(widths, table.columns)
    )
    if needed > console.width:
        table.width = needed
        console.print(table, crop=False)
    else:
        console.print(table)


def _widest(console: Console, column: Any) -> int:
    """The widest cell of ``column``, its header included, on one line."""
    wide = console.options.update_width(10_000)
    cells = [column.header, *column.cells]
    return max(
        Measurement.get(console, wide, console.render_str(c) if isinstance(c, str) else c).maximum
        for c in cells
    )
