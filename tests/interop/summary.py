#!/usr/bin/env python3
"""Prints the interop suite's summary from the clients' result files.

Usage: summary.py RUN ...   where each RUN is
    BINARY_LABEL|CLIENT|RESULTS_FILE|EXIT_STATUS|LOG_FILE

A results file holds the client's `RESULT<TAB>status<TAB>flow<TAB>detail`
lines. A flow a client did not report counts as failed, and so does a
client that exited non-zero. The last line is `N passed, M failed` (with
`, K skipped` when some were skipped); the exit status is 1 when anything
failed.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import FLOWS  # noqa: E402


def read(path: str) -> dict[str, tuple[str, str]]:
    results: dict[str, tuple[str, str]] = {}
    try:
        lines = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return results
    for line in lines:
        parts = line.split("\t", 3)
        if len(parts) >= 3 and parts[0] == "RESULT":
            results[parts[2]] = (parts[1], parts[3] if len(parts) > 3 else "")
    return results


def main(argv: list[str]) -> int:
    runs = [arg.split("|", 4) for arg in argv]
    labels: list[str] = []
    table: dict[str, dict[str, dict[str, tuple[str, str]]]] = {}
    passed = failed = skipped = 0
    problems: list[str] = []
    skips: list[str] = []

    for label, client, results_file, status, log_file in runs:
        if label not in table:
            labels.append(label)
            table[label] = {}
        results = read(results_file)
        flows = FLOWS if client != "build-static" else list(results) or ["static_binary"]
        rows: dict[str, tuple[str, str]] = {}
        for flow in flows:
            if flow in results:
                rows[flow] = results[flow]
            else:
                rows[flow] = ("FAIL", f"not reported (the client exited {status}; see {log_file})")
        for flow, (outcome, detail) in results.items():
            rows.setdefault(flow, (outcome, detail))
        if status not in ("0", "") and all(outcome != "FAIL" for outcome, _ in rows.values()):
            rows["client_exit"] = ("FAIL", f"the client exited {status}; see {log_file}")
        table[label][client] = rows

        print(f"--- {label}: {client} (log: {log_file})")
        for flow, (outcome, detail) in rows.items():
            print(f"  {outcome:<4}  {flow:<18}  {detail}")
            if outcome == "PASS":
                passed += 1
            elif outcome == "SKIP":
                skipped += 1
                skips.append(f"[{label}] {client} {flow}: {detail}")
            else:
                failed += 1
                problems.append(f"[{label}] {client} {flow}: {detail}")
        print()

    print("=== Summary (per binary, per flow, per client)")
    for label in labels:
        clients = list(table[label])
        flows: list[str] = []
        for client in clients:
            for flow in table[label][client]:
                if flow not in flows:
                    flows.append(flow)
        width = max(len(c) for c in clients) + 2
        print(f"{label:<22}" + "".join(f"{c:<{width}}" for c in clients))
        for flow in flows:
            cells = [table[label][c].get(flow, ("-", ""))[0] for c in clients]
            print(f"  {flow:<20}" + "".join(f"{cell:<{width}}" for cell in cells))
        print()
    if skips:
        print("Skipped:")
        for line in skips:
            print(f"  {line}")
    if problems:
        print("Failed:")
        for line in problems:
            print(f"  {line}")
    if skips or problems:
        print()
    closing = f"{passed} passed, {failed} failed"
    if skipped:
        closing += f", {skipped} skipped"
    print(closing)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
