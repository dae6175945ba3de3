"""What a location may show: URLs and texts with their credentials taken out.

Every place that prints a location (the proxy's banner and its 502 bodies, a workspace's
``location`` and ``repr``, error messages, logs) shows ``redacted(url)``; an error text
from a library that may quote the URL back (a driver's "invalid percent-encoded token")
goes through ``scrubbed(text, url)`` first. Both work on any text, a URL too broken to
parse included: a credential must not reach a message because its URL was malformed.
"""

from __future__ import annotations

import re
import urllib.parse

#: Query parameters that carry a credential (compared without regard to case).
SECRET_PARAMETERS = ("password", "sslpassword", "key", "api_key", "apikey", "api-key", "token", "access_token", "auth", "secret", "sig", "signature")
MASK = "***"

_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]+")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)")
_NAMES = "|".join(re.escape(p) for p in SECRET_PARAMETERS)
_PARAMETER = re.compile(rf"([?&;](?:{_NAMES})=)[^&#;]*", re.IGNORECASE)


def _userinfo(url: str) -> tuple[int, int] | None:
    """Where a URL's user information lies (start, end of the part before the last
    ``@`` of the authority), or None. The authority is taken to run to the query: a
    password may hold ``/``, ``#`` or ``@`` unescaped, and hiding too much is safe."""
    scheme = _SCHEME.match(url)
    if scheme is None:
        return None
    start = scheme.end()
    query = url.find("?", start)
    authority = url[start : query if query >= 0 else len(url)]
    at = authority.rfind("@")
    return None if at < 0 else (start, start + at)


def _names_user(url: str) -> bool:
    """Whether the part before ``@`` of a password-less ``url`` is a user name (a
    database's), not a token given as the user (``https://TOKEN@host``)."""
    return url.split("://", 1)[0].lower() in ("postgresql", "postgres")


def redacted(url: str) -> str:
    """``url`` with its password (``user:***@``), a token given as the user of a web
    URL (``***@``) and credential query parameters (``key=***``) hidden."""
    found = _userinfo(url)
    if found is not None:
        start, end = found
        user, colon, _ = url[start:end].partition(":")
        if colon:
            url = url[:start] + f"{user}:{MASK}" + url[end:]
        elif not _names_user(url):
            url = url[:start] + MASK + url[end:]
    return _PARAMETER.sub(lambda m: m.group(1) + MASK, url)


def secrets_of(url: str) -> list[str]:
    """The credentials a URL holds, as written and percent-decoded (longest first)."""
    found: list[str] = []
    where = _userinfo(url)
    if where is not None:
        user, colon, password = url[where[0] : where[1]].partition(":")
        if colon or not _names_user(url):
            found.append(password if colon else user)
    # A password with an unescaped "@": a driver that parses at the first "@" takes the
    # rest for the host and quotes it back ("could not translate host name "ss@host""),
    # so each part and each tail after an "@" is a secret too.
    for secret in list(found):
        parts = secret.split("@")
        found += [*parts, *("@".join(parts[k:]) for k in range(1, len(parts)))] if len(parts) > 1 else []
    found += [m.group(0).partition("=")[2] for m in _PARAMETER.finditer(url)]
    decoded = [urllib.parse.unquote(s) for s in found]
    return sorted({s for s in found + decoded if s}, key=len, reverse=True)


def scrubbed(text: str, url: str) -> str:
    """``text`` (a message that may quote ``url``) with every URL in it redacted and each
    of ``url``'s credentials, as written or decoded, hidden wherever else it stands
    alone (not inside a longer word: a one-letter password must not eat the letter
    everywhere)."""
    text = _URL_IN_TEXT.sub(lambda m: redacted(m.group(0)), text.replace(url, redacted(url)))
    for secret in secrets_of(url):
        text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])", MASK, text)
    return text
