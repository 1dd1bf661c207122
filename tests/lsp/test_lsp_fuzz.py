"""Fuzzing the language server's transport: frames and params (hypothesis, bounded budget).

- Frames (:mod:`citewise.server.framing`, in-process, as the server reads stdin): any run of bad
  frames (random bytes, a ``Content-Length`` too short or too long, not a number, negative or
  missing, bodies that are not JSON), delivered in chunks cut anywhere, is followed by a good
  frame that is read whole: the reader resynchronises and is never left deaf.
- Params (``AnsweringProtocol.decode``, the server's own protocol object): any JSON as the params
  of any request the server handles, or as the envelope, decodes to a typed message or is answered
  by its id with -32600/-32602 (one response, no traceback); nothing raises.

The end-to-end cases over the real process are in ``test_lsp_framing.py``; these cover the space
between them.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from .test_lsp_framing import frame, read_all

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

MARKER = b'{"jsonrpc": "2.0", "id": 4242, "method": "shutdown"}'
# Frames after the marker, so that a bad length that reaches past the marker finds more input to
# read, as it would in a live session (the editor keeps sending), before it is found wrong.
FILLERS = b"".join(frame(b'{"filler": %d, "pad": "%s"}' % (i, b"x" * 40)) for i in range(3))

garbage = st.binary(max_size=200).filter(lambda b: b"content-length" not in b.lower())
bodies = st.one_of(st.binary(max_size=60), st.just(b'{"jsonrpc": "2.0", "method": "x"}'), st.just(b"{}"))


def _wrong_length(body: bytes, delta: int) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % (len(body) + delta) + body


bad_frames = st.one_of(
    garbage,
    st.builds(_wrong_length, bodies, st.integers(-30, 60)),
    st.builds(
        lambda value, body: b"Content-Length: " + value + b"\r\n\r\n" + body,
        st.sampled_from([b"abc", b"-12", b"", b"99999999999999999999", b"1e3", b"0x10", b" 5 5"]),
        bodies,
    ),
    st.builds(lambda body: b"Content-Type: text/plain\r\n\r\n" + body, bodies),
    st.builds(lambda body: b"Content-Length: %d\n\n" % len(body) + body, bodies),  # LF-only: a frame
)


@settings(FUZZ, max_examples=200)
@given(bad=st.lists(bad_frames, min_size=1, max_size=4), cuts=st.lists(st.integers(1, 4000), max_size=6))
# Found by this test: a bad header block right before a good frame consumed the good frame's
# header; a length too long by one byte took the first byte of the next header.
@example(bad=[b"Content-Length: abc\r\n\r\n"], cuts=[])
@example(bad=[b"Content-Length: 1\r\n\r\n"], cuts=[])
@example(bad=[b"Content-Type: text/plain\r\n\r\n"], cuts=[5])
def test_a_good_frame_after_any_bad_ones_is_read(bad: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(bad) + frame(MARKER) + FILLERS
    points = sorted({c % len(stream) for c in cuts} - {0})
    chunks = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    got, most = read_all(chunks)
    assert MARKER in got, got
    assert got[-1].startswith(b'{"filler": 2'), got  # and the frames after it, in order
    assert most < 1_000_000


# -- params and envelopes -------------------------------------------------------------------------
json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**64), 2**64),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=20),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=20,
)
position = st.fixed_dictionaries({"line": json_values, "character": json_values})
text_document = st.fixed_dictionaries({"uri": st.one_of(st.just("file:///w/d.tex"), json_values)})
params = st.one_of(
    json_values,
    st.fixed_dictionaries({"textDocument": text_document, "position": st.one_of(position, json_values)}),
    st.fixed_dictionaries(
        {
            "command": st.sampled_from(["citewise.insertCitation", "citewise.status", "nope"]),
            "arguments": json_values,
        }
    ),
)
METHODS = [
    "textDocument/completion",
    "textDocument/hover",
    "textDocument/definition",
    "textDocument/codeAction",
    "completionItem/resolve",
    "workspace/executeCommand",
    "initialize",
]
ids = st.one_of(st.integers(-(2**31), 2**31), st.text(max_size=8))


@pytest.fixture(scope="module")
def protocol() -> Any:
    from citewise.server.lsp import create_server

    return create_server().protocol


def _decode(protocol: Any, data: Any) -> tuple[Any, list[dict]]:
    sent = io.BytesIO()
    protocol.set_writer(sent, include_headers=False)
    message = protocol.decode(data)
    raw = sent.getvalue().decode()
    responses = [json.loads(part) for part in raw.replace("}{", "}\n{").splitlines() if part] if raw else []
    return message, responses


@FUZZ
@given(method=st.sampled_from(METHODS), msg_id=ids, value=params)
def test_any_params_decode_or_are_answered_by_id(protocol: Any, method: str, msg_id: Any, value: Any) -> None:
    data = {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": value}
    message, responses = _decode(protocol, data)
    if message is not None:
        assert responses == [] and message.id == msg_id
        return
    assert len(responses) == 1, responses
    answer = responses[0]
    assert answer["id"] == msg_id and answer["error"]["code"] in (-32600, -32602)
    assert "data" not in answer["error"] and "Traceback" not in answer["error"]["message"]


envelopes = st.dictionaries(
    st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error"]), json_values, max_size=6
)


@FUZZ
@given(data=st.one_of(envelopes, json_values))
def test_any_envelope_decodes_or_is_refused_in_one_response(protocol: Any, data: Any) -> None:
    message, responses = _decode(protocol, data)
    assert len(responses) <= 1
    if responses:
        assert message is None
        answer = responses[0]
        assert answer["id"] == data["id"] and answer["error"]["code"] in (-32600, -32602)
        assert "data" not in answer["error"]
