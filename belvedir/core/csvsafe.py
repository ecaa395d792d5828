"""CSV that spreadsheets open as data, never as formulas.

A cell beginning with =, +, - or @ (or a tab or carriage return, which some
spreadsheets skip before looking) is run as a formula by Excel, LibreOffice
and Sheets: a model's output of `=HYPERLINK(...)` in an eval download would
run on the reader's machine. Such cells get a leading apostrophe (OWASP's
advice), which spreadsheets show as text.
"""

import csv

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutralise(value):
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


class SafeWriter:
    """csv.writer whose rows are neutralised cell by cell."""

    def __init__(self, stream, **kwargs):
        self._writer = csv.writer(stream, **kwargs)

    def writerow(self, row):
        return self._writer.writerow([neutralise(cell) for cell in row])
