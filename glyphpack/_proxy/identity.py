"""Who sent a proxied request: a ``Client`` is a digest of the request's credentials (API
key headers, a ``key`` query parameter, a deployment's own identity headers), kept in
memory; the workspace keeps a salted, keyed digest of it per conversation
(``Workspace.owner``), never the credentials. A person the operator issued a client key
(``ClientKeys``) is that person whatever credentials go upstream. A client may name its
conversation (``CONVERSATION_HEADER``): the name is scoped to the client.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import secrets
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .._errors import GlyphpackError, StoreError
from .._history.ids import check_id

Json = dict[str, Any]

#: The header a client names its conversation with (optional): the request then
#: continues that conversation (when the same client holds it) or starts it.
CONVERSATION_HEADER = "x-glyphpack-conversation"


#: Request headers that carry a client's credentials, and the query parameter (Gemini's).
#: The provider's own, then the per-user keys of the gateways a team puts in front of one
#: upstream key (LiteLLM, Portkey, Cloudflare AI Gateway, Azure API Management): users told
#: apart only by those were one client.
CREDENTIAL_HEADERS = (
    "x-api-key", "authorization", "api-key", "x-goog-api-key",
    "x-litellm-api-key", "x-portkey-api-key", "cf-aig-authorization", "ocp-apim-subscription-key",
)


CREDENTIAL_QUERY = "key"


#: A key the proxy's operator handed a person (``ClientKeys``): with it, that person is
#: the client, whatever credentials go upstream (a subscription's OAuth token that is
#: refreshed mid-session stays one client). Never forwarded.
CLIENT_KEY_HEADER = "x-glyphpack-client-key"


#: How a client key begins (``glyphpack proxy-key`` makes them).
CLIENT_KEY_PREFIX = "gpk_"


#: Hex digits of the tag that scopes a named conversation to its client, and the longest
#: name a client may give (the tagged id stays within a workspace id's 128 characters).
SCOPE_DIGITS = 12


MAX_NAME = 128 - SCOPE_DIGITS - 1


class BadRequest(GlyphpackError):
    """A request the proxy cannot take: answered in the API's error shape with ``status``
    (400: unreadable; 403: a conversation another client holds), never forwarded."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@dataclasses.dataclass(frozen=True)
class Client:
    """Who sent a request: a digest of its credentials (in memory only, never shown) and
    the conversation it names, if any. Requests without credentials are one anonymous
    client."""

    secret: bytes = dataclasses.field(repr=False)
    conversation: str | None = None

    @classmethod
    def of(
        cls, headers: Mapping[str, str], query: Mapping[str, str] | None = None, conversation: str | None = None, identity: Sequence[str] = (),
        keys: ClientKeys | None = None,
    ) -> Client:
        """The client of a request with these headers and query parameters (and the
        deployment's own ``identity`` headers: ``ProxySettings.identity_headers``); with
        a client key (``CLIENT_KEY_HEADER``) one of ``keys`` knows, the person it was
        issued to, and nothing else. ``BadRequest`` when the named conversation is not a
        valid id, or the client key is not one of ``keys`` (401), or ``keys`` requires one."""
        lowered = {k.lower(): v for k, v in headers.items()}
        names = dict.fromkeys((*CREDENTIAL_HEADERS, *(name.lower() for name in identity)))
        material = [f"{name}\0{lowered[name]}" for name in names if name in lowered]
        if query and CREDENTIAL_QUERY in query:
            material.append(f"?{CREDENTIAL_QUERY}\0{query[CREDENTIAL_QUERY]}")
        if CLIENT_KEY_HEADER in lowered or (keys is not None and keys.required):
            person = keys.person(lowered.get(CLIENT_KEY_HEADER, "")) if keys is not None else None
            if person is None:
                said = "is not one this proxy issued" if CLIENT_KEY_HEADER in lowered else "is required by this proxy and the request has none"
                raise BadRequest(f"{CLIENT_KEY_HEADER} {said}", status=401)
            material = [f"{CLIENT_KEY_HEADER}\0{person}"]
        named = conversation if conversation is not None else lowered.get(CONVERSATION_HEADER)
        if named is not None:
            try:
                check_id(named, "conversation")
                if len(named) > MAX_NAME:
                    raise StoreError(f"conversation id {named[:MAX_NAME]!r}... is longer than {MAX_NAME} characters")
            except StoreError as exc:
                raise BadRequest(f"{CONVERSATION_HEADER}: {exc}") from None
        secret = hashlib.sha256(b"glyphpack proxy client\0" + "\n".join(material).encode("utf-8", "surrogatepass")).digest()
        return cls(secret, named or None)

    def scoped(self) -> Client:
        """This client with the conversation it names taken within its own identity: the
        workspace id ``NAME.<12 hex>``, a keyed digest of its credentials. Two clients
        naming the same conversation never meet, and no answer tells one that another
        uses a name (a 403 "held by another client" was an oracle, and a first claim a
        race two clients could both win)."""
        if self.conversation is None:
            return self
        tag = hmac.new(self.secret, b"glyphpack proxy conversation names", hashlib.sha256).hexdigest()[:SCOPE_DIGITS]
        return dataclasses.replace(self, conversation=f"{self.conversation}.{tag}")

    def owner_record(self) -> dict[str, str]:
        """What the workspace keeps of this client for a conversation it starts: a fresh
        salt and the keyed digest of the client's secret under it."""
        salt = secrets.token_bytes(16)
        return {"salt": salt.hex(), "digest": hmac.new(salt, self.secret, hashlib.sha256).hexdigest()}

    def owns(self, record: Mapping[str, str] | None) -> bool:
        """Whether ``record`` (``owner_record`` of some client) is this client's."""
        if record is None:
            return False
        try:
            salt = bytes.fromhex(record["salt"])
        except (KeyError, ValueError):
            return False
        return hmac.compare_digest(hmac.new(salt, self.secret, hashlib.sha256).hexdigest(), str(record.get("digest", "")))


#: The client of requests that carry no credentials (and of calls that name none).
ANONYMOUS = Client.of({})


class ClientKeys:
    """The client keys a proxy's operator issued (``glyphpack proxy-key``), one or more
    per person: a file of ``PERSON sha256:HEX`` lines (``#`` comments), the keys' digests,
    never the keys. Read again when the file changes (a key revoked by deleting its line
    is refused from the next request on). ``required``: a request without a key is refused."""

    def __init__(self, path: Path, *, required: bool = False):
        self.path = Path(path)
        self.required = required
        self._lock = threading.Lock()
        self._read_at: tuple[int, int] | None = None
        self._people: dict[str, str] = {}
        self._load()  # a file that cannot be read is said when the proxy starts

    def person(self, key: str) -> str | None:
        """Who ``key`` was issued to (None: no one)."""
        if not key.startswith(CLIENT_KEY_PREFIX):
            return None
        with self._lock:
            try:
                stat = self.path.stat()
                if (stat.st_mtime_ns, stat.st_size) != self._read_at:
                    self._load()
            except (OSError, StoreError):  # the file gone or broken since: the keys read last stand
                pass
            digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
            return self._people.get(digest)

    def _load(self) -> None:
        try:
            stat = self.path.stat()
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise StoreError(f"cannot read the client keys in {self.path}: {getattr(exc, 'strerror', None) or exc}") from None
        people = {}
        for number, line in enumerate(text.splitlines(), start=1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            if len(words) != 2 or not words[1].startswith("sha256:") or len(words[1]) != 71 or not _is_hex(words[1][7:]):
                raise StoreError(f"{self.path}, line {number}: not 'PERSON sha256:<64 hex>' (a client key's digest, as glyphpack proxy-key writes it)")
            people[words[1][7:].lower()] = check_id(words[0], "person")
        self._people, self._read_at = people, (stat.st_mtime_ns, stat.st_size)

    @staticmethod
    def issue(path: Path, person: str) -> str:
        """A new key for ``person``, its digest added to the file at ``path`` (made if
        missing); the key itself is returned once and kept nowhere."""
        check_id(person, "person")
        key = CLIENT_KEY_PREFIX + secrets.token_urlsafe(32)
        line = f"{person} sha256:{hashlib.sha256(key.encode()).hexdigest()}\n"
        path = Path(path)
        if path.exists():
            ClientKeys(path)  # a broken file is said, not appended to
        with path.open("a", encoding="utf-8") as file:
            file.write(line)
        return key


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in text)
