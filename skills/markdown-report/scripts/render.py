#!/usr/bin/env python3
"""Render a Markdown report from a JSON data summary (csv-analyzer's format).

Standard library only. Usage:

    render.py SUMMARY.json [--output PATH] [--title TITLE]

SUMMARY.json may be "-" for standard input. The report goes to PATH, or to
stdout when no --output is given (or it is "-").
Exit status: 0 on success, 1 when the input cannot be read or has the wrong
shape, 2 on bad usage.
"""

import argparse
import json
import os
import sys


class ShapeError(Exception):
    """The input is JSON, but not a summary this script can render."""


def number(value):
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:,.6g}" if abs(value) < 1e15 else f"{value:.6g}"
    if isinstance(value, int):
        return f"{value:,}"
    return cell(value)


def cell(text):
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def require(obj, key, kind, where):
    if not isinstance(obj, dict) or key not in obj:
        raise ShapeError(f"{where} has no field {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ShapeError(f"{where}: field {key!r} must be of type {kind.__name__}")
    return value


def render(summary, title=None):
    if not isinstance(summary, dict):
        raise ShapeError("the input must be a JSON object with rows and columns")
    rows = require(summary, "rows", int, "the summary")
    columns = require(summary, "columns", list, "the summary")
    source = summary.get("source", "")
    for i, c in enumerate(columns):
        where = f"column {i + 1}"
        require(c, "name", str, where)
        kind = require(c, "type", str, where)
        if kind == "numeric":
            for key in ("min", "max", "mean"):
                require(c, key, (int, float), f"numeric {where} ({c['name']})")

    if title is None:
        title = f"Data report: {os.path.basename(source)}" if source else "Data report"
    numeric = [c for c in columns if c["type"] == "numeric"]
    text = [c for c in columns if c["type"] != "numeric"]

    out = [f"# {title}", "", "## Overview", ""]
    if source:
        out.append(f"- Source: `{source}`")
    out.append(f"- Rows: {number(rows)}")
    out.append(f"- Columns: {len(columns)} ({len(numeric)} numeric, {len(text)} text)")
    ragged = summary.get("ragged_rows") or 0
    if ragged:
        out.append(f"- Rows whose number of fields differs from the header: {number(ragged)}")

    if columns:
        out += ["", "## Columns", "", "| # | Column | Type | Non-empty | Empty |", "|---:|---|---|---:|---:|"]
        for i, c in enumerate(columns, 1):
            out.append(f"| {i} | {cell(c['name'])} | {c['type']} | "
                       f"{number(c.get('non_empty', ''))} | {number(c.get('empty', ''))} |")
    if numeric:
        out += ["", "## Numeric columns", "", "| Column | Min | Max | Mean |", "|---|---:|---:|---:|"]
        for c in numeric:
            out.append(f"| {cell(c['name'])} | {number(c['min'])} | {number(c['max'])} | {number(c['mean'])} |")
    if text:
        out += ["", "## Text columns", "", "| Column | Distinct | Most frequent |", "|---|---:|---|"]
        for c in text:
            top = c.get("top") or []
            shown = ", ".join(f"{cell(v)} ({n})" for v, n in top) if top else "-"
            out.append(f"| {cell(c['name'])} | {number(c.get('distinct', ''))} | {shown} |")
    if not columns:
        out += ["", "The table has no columns."]
    return "\n".join(out) + "\n"


def main(argv):
    parser = argparse.ArgumentParser(description="Render a Markdown report from a JSON data summary.")
    parser.add_argument("summary", help="path of the JSON summary, or - for standard input")
    parser.add_argument("--output", "-o", default="-", help="where to write the report (default: stdout)")
    parser.add_argument("--title", "-t", help="the report's title")
    args = parser.parse_args(argv)

    try:
        if args.summary == "-":
            summary = json.load(sys.stdin)
        else:
            with open(args.summary, encoding="utf-8") as f:
                summary = json.load(f)
    except FileNotFoundError:
        print(f"render.py: {args.summary}: no such file; run csv-analyzer first and pass the path of its JSON output", file=sys.stderr)
        return 1
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        print(f"render.py: cannot read {args.summary} as JSON: {e}", file=sys.stderr)
        return 1

    try:
        report = render(summary, args.title)
    except ShapeError as e:
        print(f"render.py: {args.summary} is not a data summary: {e}; "
              "expected the JSON csv-analyzer writes (source, rows, columns)", file=sys.stderr)
        return 1

    if args.output == "-":
        sys.stdout.write(report)
    else:
        try:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(report)
        except OSError as e:
            print(f"render.py: cannot write {args.output}: {e}; write under /workspace/intermediate/", file=sys.stderr)
            return 1
        print(f"wrote report to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
