"""The server's bearer token: where it lives, how it is made, how a request is checked.

The server binds loopback by default, but any local process (or a web page doing
DNS rebinding) can reach a loopback port, so every request carries
``Authorization: Bearer <token>``. The token comes from ``--token``, else
``$THREADLINE_SERVER_TOKEN``, else a file in the user config directory that the
first start creates with mode 0600 (readable by its owner only).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import stat
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from threadline.agent.config import user_config_dir
from threadline.errors import ConfigError

TOKEN_ENV = "THREADLINE_SERVER_TOKEN"
TOKEN_FILENAME = "server-token"
MIN_TOKEN_LENGTH = 16
"""A shorter token is refused: it could be guessed."""
MAX_TOKEN_LENGTH = 512


def token_path() -> Path:
    """``<user config dir>/server-token`` (``$THREADLINE_CONFIG_DIR`` overrides the dir)."""
    return user_config_dir() / TOKEN_FILENAME


def check_token(token: str, source: str) -> str:
    """``token`` without surrounding spaces, or ``ConfigError``: 16-512 printable ASCII
    characters. Not ASCII would never match: HTTP carries header values as bytes that
    clients encode differently (UTF-8, Latin-1), so such a token is refused at start."""
    token = token.strip()
    if (
        not MIN_TOKEN_LENGTH <= len(token) <= MAX_TOKEN_LENGTH
        or not token.isascii()
        or not token.isprintable()
    ):
        raise ConfigError(
            f"the server token from {source} must be {MIN_TOKEN_LENGTH}-{MAX_TOKEN_LENGTH} "
            "printable ASCII characters"
        )
    return token


def load_or_create_token(path: Path | None = None) -> str:
    """The token in ``path``, creating the file (0600, never overwriting) when missing."""
    path = path or token_path()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another server created it first: use theirs
            pass
        else:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(secrets.token_urlsafe(32) + "\n")
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the server token file {path}: {exc}") from exc
    if os.name == "posix" and mode & 0o077:
        warnings.warn(
            f"{path} is readable by other users (mode {mode:o}); run chmod 600 on it",
            stacklevel=2,
        )
    return check_token(text, str(path))


def resolve_token(given: str | None = None, *, path: Path | None = None) -> str:
    """``given`` (``--token``), else ``$THREADLINE_SERVER_TOKEN``, else the token file.

    A ``--token`` that is given is checked even when empty: ``--token ''`` is refused,
    not quietly replaced by another token."""
    if given is not None:
        return check_token(given, "--token")
    env = os.environ.get(TOKEN_ENV)
    if env:
        return check_token(env, f"${TOKEN_ENV}")
    return load_or_create_token(path)


def token_source(given: str | None, *, file_note: str = "") -> str:
    """Where ``resolve_token(given)`` takes the token from, as a start-up banner says it
    (``file_note`` follows the token file's path)."""
    if given is not None:
        return "given with --token"
    if os.environ.get(TOKEN_ENV):
        return f"from ${TOKEN_ENV}"
    return f"in {token_path()}{file_note}"


def bearer_matches(header: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header carries ``token``, compared in constant time."""
    if not header:
        return False
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(value.strip().encode(), token.encode())


# -- browsers -------------------------------------------------------------------------
#
# A browser cannot add an ``Authorization`` header to a link or an EventSource, so the
# web session browser logs in once (a one-time link that ``threadline serve`` prints,
# or a form that takes the token) and then carries an HttpOnly, SameSite=Strict cookie
# signed with the token: any server process that shares the token accepts it, and
# changing the token logs every browser out. A cookie-authenticated request that
# changes state must also come from the server's own origin (``Origin`` header), so a
# page of another site can neither read nor change anything.

SESSION_COOKIE = "threadline_session"
SESSION_SECONDS = 12 * 3600
"""How long a browser login lasts."""
LOGIN_CODE_SECONDS = 15 * 60
"""How long an unused one-time login link stays valid."""
MAX_LOGIN_CODES = 1000
"""Unused login links kept at once; issuing another forgets the oldest."""
LOGIN_PATH = "/login"
PUBLIC_PATHS = frozenset({LOGIN_PATH})
STATIC_PREFIX = "/static/"
PAGE_PREFIX = "/sessions/"
"""``/`` and everything under this are HTML pages: sent to the login form, not given 401."""
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_COOKIE_VERSION = "v1"


def _mac(token: str, purpose: str, body: str) -> str:
    digest = hmac.new(token.encode(), f"{purpose}:{body}".encode(), hashlib.sha256)
    return base64.urlsafe_b64encode(digest.digest()).decode().rstrip("=")


def make_session_cookie(token: str, *, now: float | None = None) -> str:
    """A browser login: ``v1.<issued>.<nonce>.<mac>``, signed with the token."""
    issued = int(time.time() if now is None else now)
    body = f"{_COOKIE_VERSION}.{issued}.{secrets.token_urlsafe(12)}"
    return f"{body}.{_mac(token, SESSION_COOKIE, body)}"


def session_cookie_valid(
    value: str, token: str, *, max_age: float = SESSION_SECONDS, now: float | None = None
) -> bool:
    """Whether ``value`` was made by ``make_session_cookie`` with ``token`` and is fresh."""
    body, _, mac = value.rpartition(".")
    version, _, rest = body.partition(".")
    issued, _, _nonce = rest.partition(".")
    if version != _COOKIE_VERSION or not issued.isdigit() or len(value) > 200:
        return False
    if not hmac.compare_digest(mac.encode(), _mac(token, SESSION_COOKIE, body).encode()):
        return False
    age = (time.time() if now is None else now) - int(issued)
    return 0 <= age <= max_age or -60 <= age < 0  # a minute of clock skew between workers


def cookie_value(header: str | None, name: str) -> str | None:
    """The value of cookie ``name`` in a ``Cookie`` header (None if absent or unparsable)."""
    if not header:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except CookieError:
        return None
    morsel = jar.get(name)
    return None if morsel is None else morsel.value


def same_origin(headers: Mapping[str, str], scheme: str) -> bool:
    """Whether the request says it comes from a page of this server (``Origin``, else
    ``Referer``); a request that says nothing is not trusted."""
    host = headers.get("host")
    claimed = headers.get("origin")
    if claimed is None and headers.get("referer"):
        parts = urlsplit(headers["referer"])
        claimed = f"{parts.scheme}://{parts.netloc}"
    return bool(host) and claimed == f"{scheme}://{host}"


def local_path(target: str | None, default: str = "/") -> str:
    """``target`` if it is a path on this server (no scheme, host or ``//``), else ``default``:
    where a login may send the browser on to, never another site."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return default
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.isprintable():
        return default
    return target


class LoginCodes:
    """One-time codes for login links, kept in this process: each opens one browser
    login, once, within ``LOGIN_CODE_SECONDS``. At most ``max_codes`` are outstanding
    (the oldest is forgotten first); issuing and redeeming cost O(1) however many are."""

    def __init__(
        self,
        *,
        ttl: float = LOGIN_CODE_SECONDS,
        max_codes: int = MAX_LOGIN_CODES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = ttl
        self.max_codes = max_codes
        self.clock = clock
        self._codes: OrderedDict[str, float] = OrderedDict()  # oldest (first to expire) first
        self._lock = threading.Lock()

    @property
    def count(self) -> int:
        """How many are kept now (no ``__len__``: an empty one must not be falsy)."""
        with self._lock:
            return len(self._codes)

    def issue(self) -> str:
        code = secrets.token_urlsafe(24)
        with self._lock:
            now = self.clock()
            _expire_oldest(self._codes, now)
            self._codes[code] = now + self.ttl
            while len(self._codes) > self.max_codes:
                self._codes.popitem(last=False)
        return code

    def redeem(self, code: str) -> bool:
        """True once for a code this process issued and that has not expired."""
        with self._lock:
            expires = self._codes.pop(code, None)
        return expires is not None and expires > self.clock()


def _expire_oldest(entries: OrderedDict[str, float], now: float) -> None:
    """Drop entries from the front while their time is up; entries are in the order they
    expire (one ttl, a monotonic clock), so this stops at the first one still valid."""
    while entries:
        first = next(iter(entries))
        if entries[first] > now:
            return
        del entries[first]


class LoggedOut:
    """Browser logins ended by ``/logout`` in this process, until they would have expired
    anyway. Per process, as login codes are: another worker still accepts the cookie
    until it expires (changing the token ends every login everywhere)."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._until: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, cookie: str, *, max_age: float = SESSION_SECONDS) -> None:
        with self._lock:
            now = self.clock()
            _expire_oldest(self._until, now)
            self._until[cookie] = now + max_age + 60
            self._until.move_to_end(cookie)

    def __contains__(self, cookie: object) -> bool:
        with self._lock:
            return cookie in self._until


@dataclass(frozen=True)
class Refusal:
    """Why a request may not proceed; a page gets sent to ``location`` (the login form)."""

    status: int
    code: str
    message: str
    location: str | None = None


@dataclass(frozen=True)
class Access:
    """Who may make a request: a bearer token, or a browser login cookie (same-origin
    for anything that changes state). ``/login`` and ``/static/`` are open to all."""

    token: str
    session_seconds: float = SESSION_SECONDS
    logged_out: LoggedOut = field(default_factory=LoggedOut, compare=False)

    def new_cookie(self) -> str:
        return make_session_cookie(self.token)

    def log_out(self, cookie_header: str | None) -> None:
        """End the browser login that sent ``cookie_header`` (in this process)."""
        cookie = cookie_value(cookie_header, SESSION_COOKIE)
        if cookie is not None:
            self.logged_out.add(cookie, max_age=self.session_seconds)

    def check(
        self, method: str, path: str, query: str, headers: Mapping[str, str], scheme: str
    ) -> Refusal | None:
        if bearer_matches(headers.get("authorization"), self.token):
            return None
        cross_site = method not in SAFE_METHODS and not same_origin(headers, scheme)
        if path in PUBLIC_PATHS or path.startswith(STATIC_PREFIX):
            return _CROSS_SITE if cross_site else None
        cookie = cookie_value(headers.get("cookie"), SESSION_COOKIE)
        if (
            cookie is not None
            and cookie not in self.logged_out
            and session_cookie_valid(cookie, self.token, max_age=self.session_seconds)
        ):
            return _CROSS_SITE if cross_site else None
        if method in ("GET", "HEAD") and (path == "/" or path.startswith(PAGE_PREFIX)):
            target = path + (f"?{query}" if query else "")
            return Refusal(
                401, "UNAUTHORIZED", "log in first", f"{LOGIN_PATH}?{urlencode({'next': target})}"
            )
        return Refusal(401, "UNAUTHORIZED", "missing or wrong bearer token")


_CROSS_SITE = Refusal(
    403,
    "FORBIDDEN",
    "a browser request that changes state must come from this server's own pages "
    "(its Origin header did not match)",
)
