"""Accepting any draft keeps the code intact: the property, through the real `spd-lsp --stdio`.

Positions of three kinds from real sources the model was not tuned on (see
`evaluation.accept`); every returned item's edit is applied exactly as LSP
says; and, with `multiline: "auto"`, positions at blocks whose body was removed,
where the drafts span lines. The same measurement prints as a table:
bench/bench_accept_safety.py.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig

from evaluation.accept import AUTO, BLOCK_KINDS, KINDS, SETTINGS, Case, block_cases, cases, model_ready, package_files, run
from bench.isolation import isolated_env as server_env

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

PER_KIND = 70
BLOCKS_PER_KIND = 40
SHOP = '''class Shop:
    def __init__(self):
        self.items = {}

    def add(self, name, price):
        self.items[name] = price

    def prices(self):
        return sorted()
'''


async def started(tmp_path_factory: pytest.TempPathFactory, settings: dict[str, Any]) -> Any:
    tmp = tmp_path_factory.mktemp("accept")
    config = ClientServerConfig(
        server_command=[sys.executable, "-m", "spd_lsp.cli", "--stdio", "--clientProcessId=1"],
        server_env=server_env(tmp),
    )
    lsp_client = await config.start()
    await lsp_client.initialize_session(
        lsp.InitializeParams(
            capabilities=lsp.ClientCapabilities(), root_uri=tmp.as_uri(), initialization_options={"engine": "in-process", **settings}
        )
    )
    await model_ready(lsp_client)
    return lsp_client


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(tmp_path_factory: pytest.TempPathFactory) -> Any:
    lsp_client = await started(tmp_path_factory, SETTINGS)
    yield lsp_client
    await lsp_client.shutdown_session()
    await lsp_client.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def auto_client(tmp_path_factory: pytest.TempPathFactory) -> Any:
    lsp_client = await started(tmp_path_factory, AUTO)
    yield lsp_client
    await lsp_client.shutdown_session()
    await lsp_client.stop()


async def test_drafts_inside_an_auto_paired_call_keep_the_closer(client: Any) -> None:
    """Seen defect 1: `return sorted(|)` accepted as `return sorted(self.items.values()`."""
    row = SHOP.splitlines().index("        return sorted()")
    case = Case("inside call", "shop.py", SHOP, row, len("        return sorted("))
    tally = await run(client, [case])
    assert tally.offered["inside call"] == 1
    assert not tally.failures, tally.failures


async def test_accepting_never_breaks_a_file_nor_glues_onto_the_text_after_the_cursor(client: Any) -> None:
    positions = cases(package_files(), PER_KIND)
    assert {kind: sum(c.kind == kind for c in positions) for kind in KINDS} == dict.fromkeys(KINDS, PER_KIND)
    tally = await run(client, positions)
    print("\n" + tally.table())
    assert not tally.failures, "\n".join(tally.failures)
    assert tally.offered["inside call"] >= 0.8 * PER_KIND, tally.table()


async def test_multiline_drafts_end_with_their_block_and_never_break_the_code_after_it(auto_client: Any) -> None:
    """`multiline: "auto"` at blocks whose body was removed: every item, of one line or several, applied as
    LSP says; one of several lines must leave the file parsing wherever `pass` for the body does."""
    positions = block_cases(package_files(), BLOCKS_PER_KIND)
    assert {kind: sum(c.kind == kind for c in positions) for kind in BLOCK_KINDS} == dict.fromkeys(BLOCK_KINDS, BLOCKS_PER_KIND)
    tally = await run(auto_client, positions)
    print("\n" + tally.table())
    assert not tally.failures, "\n".join(tally.failures)
    # Not vacuous: drafts there do span lines (after a header nearly always; in an empty body the model often
    # writes one statement and goes on past the block, which is cut).
    assert tally.lines["open block"] >= 0.5 * BLOCKS_PER_KIND and tally.lines["empty body"] > 0, tally.table()


async def test_auto_keeps_drafts_on_their_line_elsewhere(auto_client: Any) -> None:
    positions = cases(package_files(), 15)
    tally = await run(auto_client, positions)
    assert not tally.failures, "\n".join(tally.failures)
    assert sum(tally.lines.values()) == 0, tally.table()
