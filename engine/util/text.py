"""Names as text a person reads: control characters escaped, bytes that are not UTF-8 replaced.

File names come from the user's disk and may hold anything but ``/`` and NUL: a newline (a name
``a.png\\nskipped b.png: ...`` printed raw forges a console line), a right-to-left override
(U+202E lays out the rest of a line reversed in the PDF), or bytes that are not UTF-8 (Linux gives
them to Python as lone surrogates, ``\\udcff``, which no UTF-8 writer accepts). Names are *kept*
as the file system gives them (keys, paths, the journal, the CSVs) and *shown* through
:func:`shown`: control, line-breaking and bidirectional formatting characters become visible
escapes (``\\n``, ``\\u202e``) and undecodable bytes the replacement character U+FFFD.

:class:`EscapingFilter` does the same for log records, whose arguments are often names.
"""

from __future__ import annotations

import logging
import unicodedata

# Bidirectional formatting characters (Unicode's "Bidi_Control"): they reorder what follows them.
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_ESCAPED_CATEGORIES = frozenset({"Cc", "Zl", "Zp"})  # controls, line and paragraph separators
REPLACEMENT = "\ufffd"


def _escape(char: str) -> str:
    code = ord(char)
    if char in "\n\r\t":
        return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}[char]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: object) -> str:
    """``text`` (a name, a path, a message) safe to print, log, or lay out in a report.

    Control characters, line and paragraph separators and bidirectional formatting characters
    become escapes (``\\n``, ``\\x1b``, ``\\u202e``); lone surrogates (bytes of a name that are not
    UTF-8) become U+FFFD. Everything else is left as it is.
    """
    value = str(text)
    if value.isprintable() and value.isascii():
        return value  # the common case, without a look at each character
    out = []
    for char in value:
        if "\ud800" <= char <= "\udfff":
            out.append(REPLACEMENT)
        elif char in BIDI_CONTROLS or unicodedata.category(char) in _ESCAPED_CATEGORIES:
            out.append(_escape(char))
        else:
            out.append(char)
    return "".join(out)


class EscapingFilter(logging.Filter):
    """Makes every log record's message :func:`shown` (one record, one line; no forged lines)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        escaped = shown(message)
        if escaped != message:
            record.msg, record.args = escaped, None
        return True
