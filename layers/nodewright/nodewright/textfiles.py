"""The text a user hands over (kubeconfigs, price tables, requirements, messages) is UTF-8; when it
is not, one error says where, in the same words everywhere."""

from __future__ import annotations


class NotUtf8Error(ValueError):
    """The bytes are not UTF-8 text; the message names the first bad byte and its offset."""


def decode_utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotUtf8Error(f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from exc
