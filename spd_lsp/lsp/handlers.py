"""pygls handlers: LSP in, domain calls (`spd_lsp.session.session`), LSP out. Nothing else."""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import threading
import uuid
from pathlib import Path
from typing import IO, Any, Generator
from urllib.parse import unquote

import attrs
import cattrs
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcMethodNotFound
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, default_converter
from pygls.protocol.json_rpc import JsonRPCNotification
from pygls.protocol.language_server import lsp_method
from pygls.uris import to_fs_path

from spd_lsp import __version__, auth
from spd_lsp.lsp import transport
from spd_lsp.lsp.framing import DEFAULT_MAX_BYTES
from spd_lsp.settings import parse_settings, settings_from_configuration
from spd_lsp.cursor import EOL, locate
from spd_lsp.api import Cancelled
from spd_lsp.fit.edits import LineEdit
from spd_lsp.session.readiness import METHOD as STATUS_NOTIFICATION
from spd_lsp.session.session import Loader, Selection, Session

log = logging.getLogger(__name__)

ACCEPT = "spd.accept"
INDEX = "spd.indexWorkspace"
STATUS = "spd.status"
# The Copilot language server's notifications of a drawn and a partly accepted inline item (LSP 3.18 has
# none): `{"item": <the item as served>}`, and `acceptedLength`, UTF-16 units from the start of its insertText.
DID_SHOW = "textDocument/didShowCompletion"
DID_PARTIALLY_ACCEPT = "textDocument/didPartiallyAcceptCompletion"
MESSAGE_TYPES = {"error": lsp.MessageType.Error, "warning": lsp.MessageType.Warning, "info": lsp.MessageType.Info}


def strict_converter() -> cattrs.Converter:
    """pygls' converter, but an LSP integer must be one: 1.5, "3" and true are invalid params."""
    converter = default_converter()

    def integer(value: Any, _type: type) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
            raise TypeError(f"{value!r} is not an integer")
        return int(value)

    converter.register_structure_hook(int, integer)
    converter.register_structure_hook(bool, lambda value, _type: bool(value))  # bool subclasses int: as before
    return converter


class SpdProtocol(LanguageServerProtocol):
    """Answers every request: bad params (-32602), unknown commands (-32601), and
    notifications sent with an id (handled, then answered `null`); pygls alone drops them.
    Keeps no future of a handled notification (`_execute_handler`)."""

    def _execute_handler(self, msg_id: Any, handler: Any, callback: Any, args: Any = None, kwargs: Any = None) -> None:
        """pygls 2.1 files the future of a notification whose handler is a generator, a coroutine or a thread
        function (`didOpen`, `didChange`, `didClose`: generators) under a fresh id, and only a request's answer takes
        it out again: every keystroke left one behind (~2 kB; a typing storm's front end grew 4.5 MB a minute)."""
        if callback == self._check_handler_result:  # a notification's

            def done(future: Any, notification_id: Any = msg_id, check: Any = callback) -> None:
                self._request_futures.pop(notification_id, None)
                check(future)

            callback = done
        super()._execute_handler(msg_id, handler, callback, args, kwargs)

    def structure_message(self, data: dict[str, Any]) -> Any:
        if _is_request(data) and self._is_notification(data["method"]):
            log.warning("%s is a notification but came with id %r: handled, answered null", data["method"], data["id"])
            self._send_response(data["id"], result=None)
            data = {key: value for key, value in data.items() if key != "id"}
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if not _is_request(data):
                raise
            error = JsonRpcInvalidParams(f"invalid params for {data['method']}: {exc.__cause__ or exc}")
            self._send_response(data["id"], error=error.to_response_error())
            return JsonRPCNotification(method="$/spd/answered", jsonrpc="2.0", params=None)

    def _is_notification(self, method: Any) -> bool:
        message_type = self.get_message_type(method) if isinstance(method, str) else None
        return message_type is not None and attrs.has(message_type) and "id" not in attrs.fields_dict(message_type)

    @lsp_method(lsp.WORKSPACE_EXECUTE_COMMAND)
    def lsp_workspace__execute_command(self, params: lsp.ExecuteCommandParams) -> Generator[Any, Any, Any]:
        if params.command not in self.fm.commands:
            raise JsonRpcMethodNotFound(f"unknown command {params.command!r}")
        return (yield from super().lsp_workspace__execute_command(params))


def _is_request(data: Any) -> bool:
    return isinstance(data, dict) and "id" in data and "method" in data and "result" not in data and "error" not in data


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

    def status(self, params: dict[str, Any]) -> None:
        """The server's readiness, pushed (`spd_lsp.session.readiness`)."""
        self.call(self.server.protocol.notify, STATUS_NOTIFICATION, params)

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
    def __init__(self, loader: Loader, *, max_message_bytes: int = DEFAULT_MAX_BYTES) -> None:
        super().__init__("spd-lsp", __version__, protocol_cls=SpdProtocol, converter_factory=strict_converter)
        self.client = LspClient(self)
        self.session = Session(self.client, loader, on_status=self.client.status)
        self.max_message_bytes = max_message_bytes
        self._connected = False

    # -- transports: our framing (`spd_lsp.lsp.transport`) instead of pygls' reader --
    def start_io(self, stdin: IO[bytes] | None = None, stdout: IO[bytes] | None = None) -> None:
        self._stop_event = threading.Event()
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))

        async def run() -> None:
            stream = transport.stdin_stream(stdin or sys.stdin.buffer, asyncio.get_running_loop())
            frames = transport.frame_reader(stream, max_bytes=self.max_message_bytes)
            await transport.serve_frames(frames, self.protocol, stop=self._stop_event)

        try:
            asyncio.run(run())
        except BrokenPipeError:
            log.error("the client closed the connection; shutting down")
        finally:
            self.shutdown()

    def start_tcp(self, host: str, port: int, *, token: str) -> None:
        """One client per server, and only one that proves it holds `token` (`spd_lsp.auth`) in its
        `initialize`: others are answered an error and closed, and the server keeps listening."""
        self._stop_event = threading.Event()

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            frames = transport.frame_reader(reader, max_bytes=transport.FIRST_MAX_BYTES)
            first, problem = await transport.authenticate(frames, token)
            if problem is not None:
                await transport.turn_away(writer, first, f"authentication failed: {problem}", code=auth.AUTH_FAILED)
                return
            if self._connected:
                await transport.turn_away(writer, first, REFUSED, code=REQUEST_FAILED)
                return
            self._connected = True
            frames.max_bytes = self.max_message_bytes
            self.protocol.set_writer(writer)  # type: ignore[arg-type]
            transport.dispatch(self.protocol, first)
            await transport.serve_frames(frames, self.protocol, stop=self._stop_event)
            self.shutdown()

        async def serve() -> None:
            self._server = await asyncio.start_server(connection, host, port)
            log.info("serving on %s", ", ".join(str(s.getsockname()) for s in self._server.sockets))
            async with self._server:
                await self._server.serve_forever()

        try:
            asyncio.run(serve())
        except asyncio.CancelledError:
            log.debug("TCP server stopped")

    @property
    def encoding(self) -> str:
        encoding = self.workspace.position_encoding or lsp.PositionEncodingKind.Utf16
        return str(getattr(encoding, "value", encoding))

    def others(self, uri: str) -> list[tuple[str, str]]:
        """(uri, text) of the open documents besides `uri`: the snippets' "open" source."""
        others = [(u, d.source) for u, d in self.workspace.text_documents.items() if u != unquote(uri)]
        return self.session.readable(others)

    async def suggest(self, uri: str, position: lsp.Position, selection: Selection | None = None) -> list[LineEdit]:
        """Drafts for an open document; a superseded or cancelled request raises CancelledError."""
        document = self.workspace.text_documents.get(unquote(uri))  # as pygls keys them
        if document is None:
            return []
        job = self.session.complete(
            uri, document.source, position.line, position.character, self.encoding, selection,
            neighbours=self.others(uri),
        )
        try:
            suggestions = await asyncio.wrap_future(job.future)
        except (asyncio.CancelledError, Cancelled):
            job.cancel()
            self.session.stats.count("cancelled")
            raise asyncio.CancelledError() from None
        except Exception as exc:  # noqa: BLE001 - a failed draft answers empty, counted and shown once
            log.exception("completion failed for %s", uri)
            self.session.failed(exc)
            return []
        self.session.stats.count("answered")
        return suggestions.edits


REFUSED = "spd-lsp serves one client per server and another client is connected; start another server"
REQUEST_FAILED = -32803


def accept_command(uri: str, edit: LineEdit) -> lsp.Command:
    """Accepting runs it: uri, the draft's rank when offered, the draft, the offer's id (a client echoes
    the command back in `didShowCompletion` and `didPartiallyAcceptCompletion`)."""
    return lsp.Command(title="Accept spd-lsp draft", command=ACCEPT, arguments=[uri, edit.rank, edit.draft, edit.offer])


def offered_draft(params: Any) -> tuple[int, int] | None:
    """(offer, rank) of the item a `didShowCompletion` / `didPartiallyAcceptCompletion` names; None for an
    item the server did not serve (or a malformed one: a notification has no error to answer)."""
    item = params.get("item") if isinstance(params, dict) else getattr(params, "item", None)
    command = item.get("command") if isinstance(item, dict) else getattr(item, "command", None)
    arguments = command.get("arguments") if isinstance(command, dict) else getattr(command, "arguments", None)
    if not isinstance(arguments, (list, tuple)) or len(arguments) < 4:
        return None
    rank, offer = arguments[1], arguments[3]
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in (rank, offer)):
        return None
    return offer, rank


def edit_range(edit: LineEdit) -> lsp.Range:
    return lsp.Range(start=lsp.Position(edit.line, 0), end=lsp.Position(edit.line, edit.end_character))


WORD_END = re.compile(r"\w*\Z")


def completion_items(uri: str, before: str, edits: list[LineEdit]) -> list[lsp.CompletionItem]:
    """The completion-menu twin of the inline items, for clients without inline completion.

    Each item inserts the word the cursor is in plus the draft's first line (`insertText`,
    no `textEdit`): clients replace the word before the cursor with it, which is exact in
    Neovim 0.11's `vim.lsp.omnifunc` (it keeps only the first word of a `textEdit.newText`)
    and in VS Code. An edit that rewrites text before that word cannot be expressed so and
    is left to the inline path; so is a draft's second line (Neovim's menu cannot insert
    line breaks).
    """
    word = WORD_END.search(before).group()
    items: list[lsp.CompletionItem] = []
    for edit in edits:
        if not edit.new_text.startswith(before):
            continue
        text = word + EOL.split(edit.new_text[len(before) :], maxsplit=1)[0]
        if text == word or any(item.insert_text == text for item in items):
            continue
        items.append(
            lsp.CompletionItem(
                label=text,
                kind=lsp.CompletionItemKind.Text,
                detail="spd-lsp",
                sort_text=f"{edit.rank:03d}",
                filter_text=text,
                insert_text=text,
                insert_text_format=lsp.InsertTextFormat.PlainText,
                insert_text_mode=lsp.InsertTextMode.AsIs,
                command=accept_command(uri, edit),
            )
        )
    return items


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


def build_server(loader: Loader, *, max_message_bytes: int = DEFAULT_MAX_BYTES) -> SpdServer:
    server = SpdServer(loader, max_message_bytes=max_message_bytes)

    @server.feature(lsp.INITIALIZE)
    def initialize(ls: SpdServer, params: lsp.InitializeParams) -> None:
        ls.client.loop = asyncio.get_running_loop()
        settings, warnings = parse_settings(auth.without_token(params.initialization_options))  # stdio: ignored
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
                lsp.InlineCompletionItem(insert_text=e.new_text, range=edit_range(e), command=accept_command(uri, e))
                for e in edits
            ]
        )

    @server.feature(lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(resolve_provider=False))
    async def completion(ls: SpdServer, params: lsp.CompletionParams) -> lsp.CompletionList:
        uri, position = params.text_document.uri, params.position
        edits = await ls.suggest(uri, position)
        document = ls.workspace.text_documents.get(unquote(uri))
        cursor = locate(document.source, position.line, position.character, ls.encoding) if document else None
        before = cursor.line_prefix if cursor else ""
        return lsp.CompletionList(is_incomplete=True, items=completion_items(uri, before, edits))

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: SpdServer, params: lsp.DidOpenTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.session.warm_up(uri, params.text_document.text, neighbours=ls.others(uri))  # while the model is idle

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: SpdServer, params: lsp.DidChangeTextDocumentParams) -> None:
        ls.session.edited()  # pygls has applied the change; a warm-up of the old text is stale

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
        """`accept_command`'s arguments: uri, rank, draft (a client may send fewer)."""
        rank = args[1] if len(args) > 1 else None
        ls.session.accepted(rank if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0 else None)

    @server.feature(DID_SHOW)
    def did_show(ls: SpdServer, params: Any) -> None:
        if (found := offered_draft(params)) is not None:
            ls.session.shown(*found)

    @server.feature(DID_PARTIALLY_ACCEPT)
    def did_partially_accept(ls: SpdServer, params: Any) -> None:
        if (found := offered_draft(params)) is not None:
            ls.session.partly_accepted(*found)

    @server.command(STATUS)
    def status(ls: SpdServer, *args: Any) -> dict[str, Any]:
        return ls.session.status()

    @server.command(INDEX)
    def index_workspace(ls: SpdServer, *args: Any) -> dict[str, bool]:
        return {"started": ls.session.reindex()}

    return server
