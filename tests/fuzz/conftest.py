"""The fuzzer's counts, printed after the run (the figures of the issue note)."""

from __future__ import annotations


def pytest_terminal_summary(terminalreporter):
    from .harness import REPORTS  # the module the tests filled (imported as fuzz.harness, not tests.fuzz.harness)

    tiers = {k: v for k, v in REPORTS.items() if not k.startswith("(") and v.grammars}
    if tiers:
        terminalreporter.section("differential fuzzer")
        for name, report in tiers.items():
            terminalreporter.write_line(report.line(name))
