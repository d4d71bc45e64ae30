"""Pages compressed for clients that accept gzip: Django's ``GZipMiddleware`` at a lower level.

Django compresses at level 6; level 1 takes about a third of its CPU time for a page of HTML and
sends a little more (docs/performance.md has the figures), a good trade for pages asked every few
seconds. Each response keeps Django's padding with random bytes (its "Heal the Breach" mitigation of
BREACH), so a secret echoed beside attacker text still can't be guessed from the compressed length.
Streamed responses (downloads) are compressed by Django's middleware as they were.
"""

from __future__ import annotations

import gzip
import secrets

from django.http import HttpRequest, HttpResponse
from django.middleware.gzip import GZipMiddleware, re_accepts_gzip
from django.utils.cache import patch_vary_headers

LEVEL = 1


def gzip_padded(data: bytes, *, max_random_bytes: int) -> bytes:
    """``data`` gzipped at ``LEVEL``, its header naming a file of up to ``max_random_bytes`` random
    length, as ``django.utils.text.compress_string`` writes it."""
    compressed = memoryview(gzip.compress(data, compresslevel=LEVEL, mtime=0))
    header = bytearray(compressed[:10])
    header[3] = gzip.FNAME
    return bytes(header) + b"a" * secrets.randbelow(max_random_bytes) + b"\x00" + compressed[10:]


class FastGZipMiddleware(GZipMiddleware):
    """Django's, but a response made whole is compressed at ``LEVEL``."""

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if response.streaming:
            return super().process_response(request, response)
        # as Django's, for a response made whole
        if len(response.content) < 200 or response.has_header("Content-Encoding"):
            return response
        patch_vary_headers(response, ("Accept-Encoding",))
        if not re_accepts_gzip.search(request.META.get("HTTP_ACCEPT_ENCODING", "")):
            return response
        compressed = gzip_padded(response.content, max_random_bytes=self.max_random_bytes)
        if len(compressed) >= len(response.content):
            return response
        response.content = compressed
        response.headers["Content-Length"] = str(len(compressed))
        etag = response.get("ETag")
        if etag and etag.startswith('"'):
            response.headers["ETag"] = "W/" + etag
        response.headers["Content-Encoding"] = "gzip"
        return response
