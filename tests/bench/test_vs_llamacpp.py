"""bench/bench_vs_llamacpp.py's table on fake timings (the bench itself needs llama-cpp-python: not in `make test`)."""

from __future__ import annotations

from bench.bench_vs_llamacpp import Measure, package_source, ratio_table


def test_the_table_gives_medians_and_ours_over_theirs() -> None:
    rows = ratio_table([Measure("decode", "ms/token", ours=[30.0, 10.0, 20.0], theirs=[10.0, 12.0, 8.0]),
                        Measure("cold", "ms", ours=[100.0, 300.0], theirs=[400.0, 400.0]),
                        Measure("missing", "ms", ours=[5.0])])
    assert rows[:2] == ["| measure | llama.cpp | ours | ours / llama.cpp | total ours / total llama.cpp [95 % CI] |",
                        "| --- | ---: | ---: | ---: | ---: |"]
    assert rows[2].startswith("| decode | 10.0 ms/token | 20.0 ms/token | 2.00x | 2.00x [")  # 60 / 30
    assert rows[3].startswith("| cold | 400.0 ms | 200.0 ms | 0.50x | 0.50x [")  # an even count: the middle two's mean
    assert rows[4] == "| missing | - | 5.0 ms | - | - |"


def test_the_totals_ratio_differs_from_the_medians_and_has_an_interval_around_it() -> None:
    ours, theirs = [50.0, 50.0, 50.0, 200.0], [100.0, 100.0, 40.0, 40.0]  # medians 50 / 70, totals 350 / 280
    row = ratio_table([Measure("line", "ms", ours=ours, theirs=theirs)])[2]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3] == "0.71x"
    value, interval = cells[4].split(" [")
    low, high = (float(x.rstrip("x]")) for x in interval.split(", "))
    assert value == "1.25x" and low <= 1.25 <= high and low < high


def test_prefixes_are_an_installed_packages_sources() -> None:
    text = package_source("jinja2")
    assert "class Environment" in text and "spd_lsp" not in text


def test_timed_keeps_what_the_run_returned() -> None:
    from bench.bench_vs_llamacpp import timed

    kept: list[int] = []
    assert timed(lambda: 7, kept) >= 0.0 and kept == [7]
    assert timed(lambda: 8) >= 0.0 and kept == [7]
