"""What every request says of itself in its headers (purpose, site, item), in a form HTTP can carry."""

from __future__ import annotations

import hashlib
import re
import urllib.parse

from debate.llm._base import ChatRequest, current_item

__all__ = ["header_value", "request_tags"]


def request_tags(request: ChatRequest) -> dict[str, str]:
    """The request's declared purpose (e.g. "debate:skeptic"), its site (e.g. "c0:S1:1:trust#1") and the item it
    is made for (see item_scope) as headers, for proxies' logs and for scripted test endpoints, which route by them
    and never by prompt text. The model never sees them."""
    tags = {"X-Debate-Purpose": request.purpose}
    if request.site is not None:
        tags["X-Debate-Site"] = request.site
    item = current_item()
    if item is not None:
        tags["X-Debate-Item"] = header_value(item)
    return tags


_PLAIN = re.compile(r"[\x20-\x7e]{0,256}")
_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%")


def header_value(value: str) -> str:
    """`value` as an HTTP header may carry it: printable ASCII of up to 256 characters as it is (every id a test or
    a proxy's log routes by), anything else percent-encoded from UTF-8 and, past 256 characters, cut and followed by
    a hash of the whole, so that an item id with a control character or of 100 KB cannot break a request."""
    if _PLAIN.fullmatch(value):
        return value
    encoded = urllib.parse.quote(value.encode("utf-8", "surrogatepass"), safe=_SAFE)
    if len(encoded) <= 256:
        return encoded
    return f"{encoded[:200]}...{hashlib.sha256(encoded.encode()).hexdigest()[:16]}"
