"""How the server is reached: stdio or TCP, who may talk to it, and where its log lines go.

* TCP binds loopback unless told otherwise; another interface needs ``--allow-remote`` and a
  token, which the client presents as ``initializationOptions.token``. Until a client has
  initialised with the right token, every request is refused and notifications are dropped
  (pygls itself does not require ``initialize`` first).
* Log records go to the editor as ``window/logMessage`` with their own level (stderr lines
  show up as errors in most editors' logs); before a client is connected they go to stderr.
* Frames are read by :mod:`.framing` (stdio and TCP alike), which resynchronises after a bad one;
  every request is answered, with ``-32600``/``-32602`` by its id where it does not decode
  (:meth:`GatedProtocol.receive`), and a malformed message is logged, never shown as a popup.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import os
import socket
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, cast

import cattrs
from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcServerNotInitialized,
)
from pygls.io_ import StdoutWriter
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.json_rpc import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    RPCRequest,
)

from .framing import FdSource, StreamSource, run_frames

log = logging.getLogger("citewise.lsp")

_LEVELS = (
    (logging.ERROR, types.MessageType.Error),
    (logging.WARNING, types.MessageType.Warning),
    (logging.INFO, types.MessageType.Info),
)


class AnsweringProtocol(LanguageServerProtocol):
    """The LSP protocol answering every request, with an error by its id where it does not decode.

    pygls decodes a message inside ``json.loads`` (``structure_message`` as object hook): params
    that do not fit their type (``line: -1``, ``2**63``, no ``position``), a request without
    ``method`` or with ``"jsonrpc": "1.0"`` raised before the id was known, so the request was
    never answered and each one popped up "Error in server" in the editor. Here the envelope is
    checked first, then the params; a request that fails gets ``-32600``/``-32602`` by its id, a
    notification or response is logged in one line.
    """

    def receive(self, body: bytes) -> bool:
        """Handle one frame's body; False when it is not JSON (the frame was probably cut by a
        wrong ``Content-Length``: the reader then looks for the next header inside it)."""
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as exc:
            log.warning("an LSP message of %d bytes is not JSON (%s): skipped", len(body), exc)
            return False
        message = self.decode(data)
        if message is not None:
            try:
                self.handle_message(message)
            except Exception as exc:  # pygls answers failing requests itself; this is the rest
                log.error("an LSP message could not be handled: %s", exc)
        return True

    def decode(self, data: Any) -> Any:
        """The typed message, or None once a malformed one has been answered or logged."""
        problem = _envelope_problem(data)
        if problem is not None:
            msg_id = data.get("id") if isinstance(data, dict) else None
            self._refuse(msg_id if _is_request_like(data) else None, JsonRpcInvalidRequest, problem)
            return None
        try:
            return self._converter.structure(data, self._message_type(data))
        except Exception as exc:  # cattrs' validation errors, and whatever a converter raises
            self._refuse_decoded(data, f"{data.get('method', 'a response')}: {_why(exc)}")
            return None

    def handle_message(self, message: Any) -> None:
        """pygls drops requests after ``shutdown`` without an answer; LSP wants InvalidRequest."""
        if self._shutdown and isinstance(message, RPCRequest) and message.method != types.EXIT:
            self._refuse(message.id, JsonRpcInvalidRequest, f"{message.method} after shutdown")
            return
        super().handle_message(message)

    def _send_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        """Errors go out without the server's traceback (pygls puts one in ``data`` of every
        internal error, which editors show to the user): it goes to the server's log instead,
        and the response keeps the one-line message."""
        data = getattr(error, "data", None)
        if isinstance(data, dict) and "traceback" in data:
            log.error("request %r failed: %s\n%s", msg_id, error.message, "".join(data["traceback"]).rstrip())
            rest = {k: v for k, v in data.items() if k != "traceback"}
            error = types.ResponseError(code=error.code, message=error.message, data=rest or None)
        super()._send_response(msg_id, result, error)

    def _message_type(self, data: dict) -> type:
        """The class to decode ``data`` into, chosen as pygls's ``structure_message`` does."""
        if "id" in data:
            if "error" in data:
                return types.ResponseErrorMessage
            if "method" in data:
                return self.get_message_type(data["method"]) or JsonRPCRequestMessage
            return self._result_types.pop(data["id"], None) or JsonRPCResponseMessage
        return self.get_message_type(data["method"]) or JsonRPCNotification

    def _refuse(self, msg_id: Any, error: type[JsonRpcException], why: str) -> None:
        """Log one line and, for a request with a usable id, answer the error by that id."""
        log.warning("a malformed LSP message (%s): %s", error.MESSAGE, why)
        if isinstance(msg_id, str) or (isinstance(msg_id, int) and not isinstance(msg_id, bool)):
            self._send_response(msg_id, None, error(message=f"{error.MESSAGE}: {why}").to_response_error())

    def _refuse_decoded(self, data: dict, why: str) -> None:
        """Params that do not decode: a request is answered -32602, a response fails the server's
        own request that waits for it (no hang), a notification is only logged."""
        msg_id = data.get("id")
        if "method" in data:
            self._refuse(msg_id, JsonRpcInvalidParams, why)
            return
        log.warning("a malformed LSP response to %r: %s", msg_id, why)
        future = self._request_futures.pop(msg_id, None) if msg_id is not None else None
        if future is not None and not future.done():
            future.set_exception(JsonRpcInvalidParams(message=why))


def _why(exc: Exception) -> str:
    """One short line saying which field failed (``invalid value @ $.params.position``)."""
    try:
        return "; ".join(cattrs.transform_error(exc))[:300]
    except Exception:
        return str(exc)[:300]


def _is_request_like(data: Any) -> bool:
    """A message that expects an answer: it has a method, or has an id but no result or error."""
    return (
        isinstance(data, dict)
        and "id" in data
        and ("method" in data or not {"result", "error"} & data.keys())
    )


def _envelope_problem(data: Any) -> str | None:
    """What makes ``data`` no JSON-RPC 2.0 message (None if it is one)."""
    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__}, not an object"
    if data.get("jsonrpc") != "2.0":
        return f"jsonrpc is {data.get('jsonrpc')!r}, not '2.0'"
    msg_id = data.get("id")
    if "id" in data and (isinstance(msg_id, bool) or not isinstance(msg_id, int | str)):
        return f"id {msg_id!r} is not a number or a string"
    if "method" in data and not isinstance(data["method"], str):
        return "method is not a string"
    if "method" not in data and not {"result", "error"} & data.keys():
        return "no method" if "id" in data else "neither a request, a response nor a notification"
    return None


class _TokenGate(Protocol):
    """What :class:`GatedProtocol` reads and sets on its server (``CitewiseServer`` holds both; it
    imports this module, so it is described here rather than imported)."""

    required_token: str | None
    token_ok: bool


class GatedProtocol(AnsweringProtocol):
    """The LSP protocol, refusing everything until ``initialize`` presented the server's token."""

    def _authorized(self) -> bool:
        token = getattr(self._server, "required_token", None)
        return not token or getattr(self._server, "token_ok", False)

    def _handle_request(self, msg_id, method_name: str, params: Any):
        if not self._authorized():
            if method_name == types.INITIALIZE:
                opts = getattr(params, "initialization_options", None)
                given = opts.get("token") if isinstance(opts, dict) else None
                gate = cast(_TokenGate, self._server)  # a token is required: the server holds one
                if isinstance(given, str) and hmac.compare_digest(given, gate.required_token or ""):
                    gate.token_ok = True
                    return super()._handle_request(msg_id, method_name, params)
                log.warning("a client presented no or a wrong token: refused")
            error = JsonRpcServerNotInitialized("citewise: initialize with the server's token first")
            self._send_response(msg_id, None, error.to_response_error())
            return None
        return super()._handle_request(msg_id, method_name, params)

    def _handle_notification(self, method_name: str, params: Any):
        if not self._authorized() and method_name != types.EXIT:
            return None
        return super()._handle_notification(method_name, params)

    def _run_generator(self, future: Any, *, gen: Any, result_future: Any) -> None:
        """pygls runs ``workspace/executeCommand`` as a generator that starts the command's
        coroutine under an id of its own; ``$/cancelRequest`` then cancels only the request's
        answer, and the command (a reindex, a fetch) ran on. So the handler a generator starts is
        cancelled with its answer (:meth:`_execute_handler`): the command gets ``CancelledError``."""
        outer = getattr(_ANSWER, "future", None)
        _ANSWER.future = result_future
        try:
            super()._run_generator(future, gen=gen, result_future=result_future)
        finally:
            _ANSWER.future = outer

    def _execute_handler(
        self, msg_id: Any, handler: Any, callback: Any, args: Any = None, kwargs: Any = None
    ) -> None:
        answer = getattr(_ANSWER, "future", None)
        _ANSWER.future = None  # only the handler the generator starts itself
        try:
            super()._execute_handler(msg_id, handler, callback, args, kwargs)
        finally:
            _ANSWER.future = answer
        inner = self._request_futures.get(msg_id)
        if answer is not None and inner is not None and inner is not answer:
            answer.add_done_callback(lambda f: f.cancelled() and inner.cancel())


# The answer of the generator running in this thread, if any (GatedProtocol._run_generator).
_ANSWER = threading.local()


class EditorLogHandler(logging.Handler):
    """Send log records to the editor's log at their own level (``window/logMessage``)."""

    def __init__(self, server: Any, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.server, self.loop = server, loop

    def emit(self, record: logging.LogRecord) -> None:
        kind = next((t for level, t in _LEVELS if record.levelno >= level), types.MessageType.Log)
        params = types.LogMessageParams(kind, self.format(record))
        try:
            if threading.current_thread() is threading.main_thread():
                self.server.window_log_message(params)
            elif not self.loop.is_closed():
                self.loop.call_soon_threadsafe(self.server.window_log_message, params)
        except Exception:  # the log must never break the server
            pass


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        try:
            return all(ipaddress.ip_address(a[4][0]).is_loopback for a in socket.getaddrinfo(host, None))
        except OSError:
            return False


def configure_logging() -> None:
    """stderr until an editor is connected; ``CITEWISE_LOG`` sets the level (default WARNING)."""
    level = os.environ.get("CITEWISE_LOG", "WARNING").upper()
    logging.basicConfig(
        level=level if level in logging.getLevelNamesMapping() else "WARNING",
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )


def attach_editor_log(server: Any) -> None:
    """From ``initialize`` on, citewise's records go to the editor (not stderr) at their level."""
    root = logging.getLogger("citewise")
    handler = EditorLogHandler(server, asyncio.get_running_loop())
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    root.addHandler(handler)
    root.propagate = False


def start_io(server: Any) -> None:
    """Serve on stdin/stdout like pygls's ``start_io``, but with :mod:`.framing`'s reader (pygls's
    own never answers again after one bad frame). Stdin is read in a thread of its own."""
    server._stop_event = threading.Event()
    server.protocol.set_writer(StdoutWriter(sys.stdout.buffer))
    source = FdSource(sys.stdin.fileno(), ThreadPoolExecutor(1, thread_name_prefix="citewise-stdin"))
    try:
        asyncio.run(run_frames(server._stop_event, source, server.protocol.receive))
    except BrokenPipeError:
        log.error("the editor closed the connection: shutting down")
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()


def start_tcp(server: Any, host: str, port: int) -> None:
    """Serve on TCP like pygls's ``start_tcp``, with the same reader as :func:`start_io`."""
    server._stop_event = stop_event = threading.Event()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        server.protocol.set_writer(writer)
        await run_frames(stop_event, StreamSource(reader), server.protocol.receive)
        server.shutdown()

    async def listen() -> None:
        server._server = await asyncio.start_server(connection, host, port)
        async with server._server:
            await server._server.serve_forever()

    try:
        asyncio.run(listen())
    except asyncio.CancelledError:
        log.debug("the TCP server was cancelled")
