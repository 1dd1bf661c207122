"""How the server is reached: stdio or TCP, who may talk to it, and where its log lines go.

* TCP binds loopback unless told otherwise; another interface needs ``--allow-remote`` and a
  token, which the client presents as ``initializationOptions.token``. Until a client has
  initialised with the right token, every request is refused and notifications are dropped
  (pygls itself does not require ``initialize`` first).
* Log records go to the editor as ``window/logMessage`` with their own level (stderr lines
  show up as errors in most editors' logs); before a client is connected they go to stderr.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
import os
import socket
import sys
import threading
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcServerNotInitialized
from pygls.protocol import LanguageServerProtocol

log = logging.getLogger("citewise.lsp")

_LEVELS = (
    (logging.ERROR, types.MessageType.Error),
    (logging.WARNING, types.MessageType.Warning),
    (logging.INFO, types.MessageType.Info),
)


class GatedProtocol(LanguageServerProtocol):
    """The LSP protocol, refusing everything until ``initialize`` presented the server's token."""

    def _authorized(self) -> bool:
        token = getattr(self._server, "required_token", None)
        return not token or getattr(self._server, "token_ok", False)

    def _handle_request(self, msg_id, method_name: str, params: Any):
        if not self._authorized():
            if method_name == types.INITIALIZE:
                opts = getattr(params, "initialization_options", None)
                given = opts.get("token") if isinstance(opts, dict) else None
                if isinstance(given, str) and hmac.compare_digest(given, self._server.required_token):
                    self._server.token_ok = True
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
