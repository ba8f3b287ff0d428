"""pygls handlers: LSP in, domain calls (`spd_lsp.session`), LSP out. Nothing else."""

from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.json_rpc import JsonRPCNotification
from pygls.uris import to_fs_path

from spd_lsp import __version__
from spd_lsp.config import parse_settings, settings_from_configuration
from spd_lsp.decoding.types import Cancelled
from spd_lsp.postprocess import LineEdit
from spd_lsp.session import Loader, Selection, Session, load_engine

log = logging.getLogger(__name__)

ACCEPT = "spd.accept"
INDEX = "spd.indexWorkspace"
STATUS = "spd.status"
MESSAGE_TYPES = {"error": lsp.MessageType.Error, "warning": lsp.MessageType.Warning, "info": lsp.MessageType.Info}


class SpdProtocol(LanguageServerProtocol):
    """Answers requests whose params do not deserialize (pygls alone drops them)."""

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if "id" not in data or "method" not in data or "result" in data or "error" in data:
                raise
            error = JsonRpcInvalidParams(f"invalid params for {data['method']}: {exc.__cause__ or exc}")
            self._send_response(data["id"], error=error.to_response_error())
            return JsonRPCNotification(method="$/spd/answered", jsonrpc="2.0", params=None)


class LspProgress:
    def __init__(self, client: LspClient, token: str) -> None:
        self.client, self.token = client, token

    def report(self, message: str, percentage: int | None = None) -> None:
        value = lsp.WorkDoneProgressReport(message=message, percentage=percentage)
        self.client.call(self.client.server.work_done_progress.report, self.token, value)

    def end(self, message: str) -> None:
        self.client.call(
            self.client.server.work_done_progress.end, self.token, lsp.WorkDoneProgressEnd(message=message)
        )


class LogProgress:
    """For clients without work-done progress: the log gets the start and the end."""

    def __init__(self, title: str) -> None:
        self.title = title
        log.info("%s", title)

    def report(self, message: str, percentage: int | None = None) -> None:
        log.debug("%s: %s", self.title, message)

    def end(self, message: str) -> None:
        log.info("%s: %s", self.title, message)


class LspClient:
    """`workspace.Client` over the connection; callable from any thread."""

    def __init__(self, server: SpdServer) -> None:
        self.server = server
        self.loop: asyncio.AbstractEventLoop | None = None

    def call(self, function: Any, *args: Any) -> None:
        if self.loop is None or self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(function, *args)

    def show(self, kind: str, text: str) -> None:
        params = lsp.ShowMessageParams(type=MESSAGE_TYPES[kind], message=text)
        self.call(self.server.window_show_message, params)

    def progress(self, title: str) -> LspProgress | LogProgress:
        capabilities = self.server.client_capabilities.window
        if not (capabilities and capabilities.work_done_progress):
            return LogProgress(title)
        token = f"spd-{uuid.uuid4()}"
        self.call(self._begin, token, title)
        return LspProgress(self, token)

    def _begin(self, token: str, title: str) -> None:
        self.server.work_done_progress.create(token)
        self.server.work_done_progress.begin(token, lsp.WorkDoneProgressBegin(title=title, percentage=0))


class SpdServer(LanguageServer):
    def __init__(self, loader: Loader = load_engine) -> None:
        super().__init__("spd-lsp", __version__, protocol_cls=SpdProtocol)
        self.client = LspClient(self)
        self.session = Session(self.client, loader)

    @property
    def encoding(self) -> str:
        encoding = self.workspace.position_encoding or lsp.PositionEncodingKind.Utf16
        return str(getattr(encoding, "value", encoding))

    async def suggest(self, uri: str, position: lsp.Position, selection: Selection | None = None) -> list[LineEdit]:
        """Drafts for an open document; a superseded or cancelled request raises CancelledError."""
        document = self.workspace.text_documents.get(unquote(uri))  # as pygls keys them
        if document is None:
            return []
        job = self.session.complete(uri, document.source, position.line, position.character, self.encoding, selection)
        try:
            suggestions = await asyncio.wrap_future(job.future)
        except (asyncio.CancelledError, Cancelled):
            job.cancel()
            self.session.stats.cancelled += 1
            raise asyncio.CancelledError() from None
        except Exception:  # noqa: BLE001 - a failed draft is no reason to show the user an error
            log.exception("completion failed for %s", uri)
            return []
        self.session.stats.answered += 1
        return suggestions.edits


def accept_command(uri: str, rank: int, edit: LineEdit) -> lsp.Command:
    return lsp.Command(title="Accept spd-lsp draft", command=ACCEPT, arguments=[uri, rank, edit.draft])


def edit_range(edit: LineEdit) -> lsp.Range:
    return lsp.Range(start=lsp.Position(edit.line, 0), end=lsp.Position(edit.line, edit.end_character))


def _selection(context: lsp.InlineCompletionContext) -> Selection | None:
    selected = context.selected_completion_info
    if selected is None:
        return None
    start, end = selected.range.start, selected.range.end
    return Selection(start.line, start.character, end.line, end.character, selected.text)


def _roots(params: lsp.InitializeParams) -> list[Path]:
    uris = [folder.uri for folder in params.workspace_folders or []]
    if not uris and params.root_uri:
        uris = [params.root_uri]
    if not uris and params.root_path:
        return [Path(params.root_path)]
    return [Path(path) for uri in uris if (path := to_fs_path(uri))]


def build_server(loader: Loader = load_engine) -> SpdServer:
    server = SpdServer(loader)

    @server.feature(lsp.INITIALIZE)
    def initialize(ls: SpdServer, params: lsp.InitializeParams) -> None:
        ls.client.loop = asyncio.get_running_loop()
        settings, warnings = parse_settings(params.initialization_options)
        ls.session.configure(settings, warnings, _roots(params))

    @server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(ls: SpdServer, params: lsp.DidChangeConfigurationParams) -> None:
        settings, warnings = settings_from_configuration(params.settings)
        ls.session.configure(settings, warnings)

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def did_change_folders(ls: SpdServer, params: lsp.DidChangeWorkspaceFoldersParams) -> None:
        folders = [Path(path) for folder in ls.workspace.folders.values() if (path := to_fs_path(folder.uri))]
        ls.session.configure(ls.session.settings, roots=folders)

    @server.feature(lsp.TEXT_DOCUMENT_INLINE_COMPLETION, lsp.InlineCompletionOptions())
    async def inline_completion(ls: SpdServer, params: lsp.InlineCompletionParams) -> lsp.InlineCompletionList:
        uri = params.text_document.uri
        edits = await ls.suggest(uri, params.position, _selection(params.context))
        return lsp.InlineCompletionList(
            items=[
                lsp.InlineCompletionItem(insert_text=e.new_text, range=edit_range(e), command=accept_command(uri, i, e))
                for i, e in enumerate(edits)
            ]
        )

    @server.feature(lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(resolve_provider=False))
    async def completion(ls: SpdServer, params: lsp.CompletionParams) -> lsp.CompletionList:
        uri = params.text_document.uri
        edits = await ls.suggest(uri, params.position)
        items = [
            lsp.CompletionItem(
                label=e.draft.strip(),
                kind=lsp.CompletionItemKind.Text,
                detail="spd-lsp",
                sort_text=f"{i:03d}",
                filter_text=e.new_text,
                text_edit=lsp.TextEdit(range=edit_range(e), new_text=e.new_text),
                command=accept_command(uri, i, e),
            )
            for i, e in enumerate(edits)
        ]
        return lsp.CompletionList(is_incomplete=True, items=items)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE, lsp.SaveOptions(include_text=False))
    def did_save(ls: SpdServer, params: lsp.DidSaveTextDocumentParams) -> None:
        if path := to_fs_path(params.text_document.uri):
            ls.session.saved(Path(path))

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: SpdServer, params: lsp.DidCloseTextDocumentParams) -> None:
        ls.session.close_document(params.text_document.uri)

    @server.feature(lsp.SHUTDOWN)
    async def shutdown(ls: SpdServer, *args: Any) -> None:
        await asyncio.to_thread(ls.session.close)  # bounded joins, but never on the event loop

    @server.command(ACCEPT)
    def accept(ls: SpdServer, *args: Any) -> None:
        ls.session.accepted()

    @server.command(STATUS)
    def status(ls: SpdServer, *args: Any) -> dict[str, Any]:
        return ls.session.status()

    @server.command(INDEX)
    def index_workspace(ls: SpdServer, *args: Any) -> dict[str, bool]:
        return {"started": ls.session.reindex()}

    return server
