#!/usr/bin/env python3
"""Summarize a CSV file: row count, columns, and min/max/mean of numeric columns.

Standard library only. Usage:

    analyze.py CSV [--output PATH] [--format json|markdown] [--delimiter D]

The summary goes to PATH, or to stdout when no --output is given (or it is "-").
Exit status: 0 on success, 1 when the file cannot be read or parsed, 2 on bad usage.
"""

import argparse
import collections
import csv
import json
import math
import os
import sys

TOP_VALUES = 5
SNIFF_BYTES = 64 * 1024


def parse_number(text):
    """Return text as an int or float, or None when it is not a finite number."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return None
    if math.isnan(value) or math.isinf(value):
        return None
    return value


def detect_delimiter(sample):
    try:
        return csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
    except csv.Error:
        return ","


def summarize(path, delimiter=None):
    with open(path, newline="", encoding="utf-8-sig") as f:
        sample = f.read(SNIFF_BYTES)
        f.seek(0)
        reader = csv.reader(f, delimiter=delimiter or detect_delimiter(sample))
        header = next(reader, None)
        if header is None:
            return {"source": path, "rows": 0, "ragged_rows": 0, "columns": []}
        names = [h.strip() for h in header]
        width = len(names)
        non_empty = [0] * width
        numeric = [True] * width
        # Running statistics keep memory flat however long the file is.
        low = [None] * width
        high = [None] * width
        total = [0] * width
        counters = [collections.Counter() for _ in range(width)]
        rows = 0
        ragged = 0
        for record in reader:
            if not record or all(not field.strip() for field in record):
                continue
            rows += 1
            if len(record) != width:
                ragged += 1
            for i in range(width):
                value = record[i].strip() if i < len(record) else ""
                if not value:
                    continue
                non_empty[i] += 1
                counters[i][value] += 1
                if numeric[i]:
                    number = parse_number(value)
                    if number is None:
                        numeric[i] = False
                        continue
                    low[i] = number if low[i] is None else min(low[i], number)
                    high[i] = number if high[i] is None else max(high[i], number)
                    total[i] += number

    columns = []
    for i, name in enumerate(names):
        column = {"name": name}
        if numeric[i] and non_empty[i]:
            column["type"] = "numeric"
            column["non_empty"] = non_empty[i]
            column["empty"] = rows - non_empty[i]
            column["min"] = low[i]
            column["max"] = high[i]
            column["mean"] = total[i] / non_empty[i]
        else:
            column["type"] = "text"
            column["non_empty"] = non_empty[i]
            column["empty"] = rows - non_empty[i]
            column["distinct"] = len(counters[i])
            column["top"] = [[v, n] for v, n in counters[i].most_common(TOP_VALUES)]
        columns.append(column)
    return {"source": path, "rows": rows, "ragged_rows": ragged, "columns": columns}


def fmt(value):
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(summary):
    lines = [
        f"# Summary of {os.path.basename(summary['source'])}",
        "",
        f"- Rows: {summary['rows']}",
        f"- Columns: {len(summary['columns'])}",
    ]
    if summary["ragged_rows"]:
        lines.append(f"- Rows with a different number of fields than the header: {summary['ragged_rows']}")
    if summary["columns"]:
        lines += ["", "| Column | Type | Non-empty | Min | Max | Mean |", "|---|---|---|---|---|---|"]
        for c in summary["columns"]:
            if c["type"] == "numeric":
                stats = [fmt(c["min"]), fmt(c["max"]), fmt(c["mean"])]
            else:
                stats = ["", "", ""]
            lines.append("| " + " | ".join([cell(c["name"]), c["type"], str(c["non_empty"])] + stats) + " |")
    return "\n".join(lines) + "\n"


def main(argv):
    parser = argparse.ArgumentParser(description="Summarize a CSV file.")
    parser.add_argument("csv", help="path of the CSV file; its first row is the header")
    parser.add_argument("--output", "-o", default="-", help="where to write the summary (default: stdout)")
    parser.add_argument("--format", "-f", choices=["json", "markdown"],
                        help="json or markdown (default: markdown for a .md output, json otherwise)")
    parser.add_argument("--delimiter", "-d", help="field separator (default: detected)")
    args = parser.parse_args(argv)
    if args.delimiter is not None and len(args.delimiter) != 1:
        parser.error("--delimiter must be one character")

    output_format = args.format
    if output_format is None:
        output_format = "markdown" if args.output.lower().endswith((".md", ".markdown")) else "json"

    try:
        summary = summarize(args.csv, args.delimiter)
    except FileNotFoundError:
        print(f"analyze.py: {args.csv}: no such file; uploaded files are under /workspace/uploads/", file=sys.stderr)
        return 1
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        print(f"analyze.py: cannot read {args.csv} as UTF-8 CSV: {e}", file=sys.stderr)
        return 1

    if output_format == "json":
        text = json.dumps(summary, indent=2, ensure_ascii=False) + "\n"
    else:
        text = to_markdown(summary)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        try:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:
            print(f"analyze.py: cannot write {args.output}: {e}; write under /workspace/intermediate/", file=sys.stderr)
            return 1
        print(f"wrote {output_format} summary of {summary['rows']} rows to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
