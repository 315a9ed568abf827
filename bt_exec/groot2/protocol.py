"""The facts of Groot2's monitor protocol (BehaviorTree.CPP 4's ``Groot2Publisher``, protocol 2), free of ZeroMQ.

Every request is a multipart ZeroMQ message whose first part is a 6-byte header: the protocol id (uint8, 2), the
request type (one ASCII byte) and a request id (uint32, little-endian). A reply's first part is that header
(protocol 2, the request's type and id) followed by the 16-byte id of the tree served, which changes whenever
another tree is served; an error reply is the two parts ``error`` and a message. The status reply is, for
every node, its uid (uint16, little-endian) and its status byte; the blackboard reply is MessagePack of
``{blackboard name: {key: value}}``.
"""
from __future__ import annotations

import math
import struct

PROTOCOL_ID = 2
HEADER = struct.Struct("<BBI")  # protocol, request type, request id
TREE_ID_BYTES = 16

# Request types (one ASCII byte each).
FULLTREE, STATUS, BLACKBOARD = b"T", b"S", b"B"
HOOK_INSERT, HOOK_REMOVE, BREAKPOINT_REACHED, BREAKPOINT_UNLOCK = b"I", b"R", b"N", b"U"
HOOKS_DUMP, REMOVE_ALL_HOOKS, DISABLE_ALL_HOOKS = b"D", b"A", b"X"
TOGGLE_RECORDING, GET_TRANSITIONS = b"r", b"t"
REQUEST_NAMES = {FULLTREE: "full_tree", STATUS: "status", BLACKBOARD: "blackboard", HOOK_INSERT: "hook_insert",
                 HOOK_REMOVE: "hook_remove", BREAKPOINT_REACHED: "breakpoint_reached",
                 BREAKPOINT_UNLOCK: "breakpoint_unlock", HOOKS_DUMP: "hooks_dump",
                 REMOVE_ALL_HOOKS: "hooks_remove_all", DISABLE_ALL_HOOKS: "disable_hooks",
                 TOGGLE_RECORDING: "toggle_recording", GET_TRANSITIONS: "get_transitions"}

# Node statuses; a node reset to IDLE shows 10 + the status it had (Groot2 draws it faded).
IDLE, RUNNING, SUCCESS, FAILURE, SKIPPED = 0, 1, 2, 3, 4
IDLE_AFTER = 10
STATUS_ENTRY = struct.Struct("<HB")  # uid, status


def request_header(data: bytes) -> tuple[int, bytes, int] | None:
    """(protocol, request type, request id) of a request's first part; None when it is not 6 bytes."""
    if len(data) != HEADER.size:
        return None
    protocol, kind, request_id = HEADER.unpack(data)
    return protocol, bytes((kind,)), request_id


def reply_header(kind: bytes, request_id: int, tree_id: bytes) -> bytes:
    """A reply's first part: the request's type and id under protocol 2, then the served tree's 16-byte id."""
    return HEADER.pack(PROTOCOL_ID, kind[0], request_id) + tree_id


def msgpack(value: object) -> bytes:
    """``value`` (JSON's types) in MessagePack, as BT.CPP's blackboard reply carries it: each integer in the
    smallest form that holds it, floats as float64, strings UTF-8. A value JSON cannot hold (a non-finite float,
    a non-string key, another type) is written as its text."""
    out = bytearray()
    _pack(value, out)
    return bytes(out)


def _pack(value: object, out: bytearray) -> None:
    if value is None:
        out.append(0xC0)
    elif value is True or value is False:
        out.append(0xC3 if value else 0xC2)
    elif isinstance(value, int):
        _pack_int(value, out)
    elif isinstance(value, float) and math.isfinite(value):
        out.append(0xCB)
        out += struct.pack(">d", value)
    elif isinstance(value, str):
        _pack_str(value, out)
    elif isinstance(value, (list, tuple)):
        _pack_length(len(value), out, 0x90, 0xDC, 0xDD)
        for item in value:
            _pack(item, out)
    elif isinstance(value, dict):
        _pack_length(len(value), out, 0x80, 0xDE, 0xDF)
        for key, item in value.items():
            _pack_str(key if isinstance(key, str) else str(key), out)
            _pack(item, out)
    else:
        _pack_str(str(value), out)


def _pack_int(value: int, out: bytearray) -> None:
    if 0 <= value < 0x80 or -32 <= value < 0:
        out += struct.pack(">b" if value < 0 else ">B", value)
    elif 0 <= value < 2 ** 64:
        for limit, code, form in ((2 ** 8, 0xCC, ">B"), (2 ** 16, 0xCD, ">H"), (2 ** 32, 0xCE, ">I"),
                                  (2 ** 64, 0xCF, ">Q")):
            if value < limit:
                out.append(code)
                out += struct.pack(form, value)
                return
    elif -(2 ** 63) <= value < 0:
        for limit, code, form in ((2 ** 7, 0xD0, ">b"), (2 ** 15, 0xD1, ">h"), (2 ** 31, 0xD2, ">i"),
                                  (2 ** 63, 0xD3, ">q")):
            if value >= -limit:
                out.append(code)
                out += struct.pack(form, value)
                return
    else:
        _pack_str(str(value), out)  # beyond 64 bits: MessagePack has no integer for it


def _pack_str(text: str, out: bytearray) -> None:
    data = text.encode("utf-8", "replace")
    size = len(data)
    if size < 32:
        out.append(0xA0 | size)
    elif size < 2 ** 8:
        out += bytes((0xD9, size))
    elif size < 2 ** 16:
        out.append(0xDA)
        out += struct.pack(">H", size)
    else:
        out.append(0xDB)
        out += struct.pack(">I", size)
    out += data


def _pack_length(size: int, out: bytearray, fixed: int, code16: int, code32: int) -> None:
    if size < 16:
        out.append(fixed | size)
    elif size < 2 ** 16:
        out.append(code16)
        out += struct.pack(">H", size)
    else:
        out.append(code32)
        out += struct.pack(">I", size)
