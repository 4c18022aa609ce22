"""Splits a SQL script into its statements, for the migration steps that must run statement by
statement outside a transaction (``-- workhorse:no-transaction``: PostgreSQL runs a
multi-statement query in one implicit transaction, where ``CREATE INDEX CONCURRENTLY`` is
refused). A semicolon ends a statement unless it is inside a quoted string or identifier, a
dollar-quoted body or a comment."""

from __future__ import annotations

import re

_DOLLAR_TAG = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")


def split_statements(script: str) -> list[str]:
    """The statements of ``script`` without their terminating semicolons, each stripped; a part
    that holds only comments and white space is no statement."""
    statements: list[str] = []
    start = 0
    i = 0
    meaningful = False
    n = len(script)
    while i < n:
        c = script[i]
        if script.startswith("--", i):
            end = script.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if script.startswith("/*", i):
            i = _block_comment_end(script, i)
            continue
        if c == ";":
            if meaningful:
                statements.append(script[start:i].strip())
            start = i + 1
            meaningful = False
            i += 1
            continue
        if not c.isspace():
            meaningful = True
        if c in "'\"":
            escapes = c == "'" and i > 0 and script[i - 1] in "eE" and (i < 2 or not (script[i - 2].isalnum() or script[i - 2] == "_"))
            i = _quoted_end(script, i, c, escapes)
            continue
        if c == "$":
            tag = _DOLLAR_TAG.match(script, i)
            if tag is not None and (i == 0 or not (script[i - 1].isalnum() or script[i - 1] == "_")):
                close = script.find(tag.group(0), tag.end())
                i = n if close < 0 else close + len(tag.group(0))
                continue
        i += 1
    if meaningful:
        statements.append(script[start:].strip())
    return statements


def _block_comment_end(script: str, i: int) -> int:
    # PostgreSQL's block comments nest.
    depth = 0
    while i < len(script):
        if script.startswith("/*", i):
            depth += 1
            i += 2
        elif script.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    return i


def _quoted_end(script: str, i: int, quote: str, escapes: bool) -> int:
    i += 1
    while i < len(script):
        c = script[i]
        if escapes and c == "\\":
            i += 2
            continue
        if c == quote:
            if script.startswith(quote * 2, i):
                i += 2
                continue
            return i + 1
        i += 1
    return i
