"""The server's bearer token: where it lives, how it is made, how a request is checked.

The server binds loopback by default, but any local process (or a web page doing
DNS rebinding) can reach a loopback port, so every request carries
``Authorization: Bearer <token>``. The token comes from ``--token``, else
``$THREADLINE_SERVER_TOKEN``, else a file in the user config directory that the
first start creates with mode 0600 (readable by its owner only).
"""

from __future__ import annotations

import hmac
import os
import secrets
import stat
import warnings
from pathlib import Path

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
    token = token.strip()
    if not MIN_TOKEN_LENGTH <= len(token) <= MAX_TOKEN_LENGTH or not token.isprintable():
        raise ConfigError(
            f"the server token from {source} must be {MIN_TOKEN_LENGTH}-{MAX_TOKEN_LENGTH} "
            "printable characters"
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
    """``given`` (``--token``), else ``$THREADLINE_SERVER_TOKEN``, else the token file."""
    if given:
        return check_token(given, "--token")
    env = os.environ.get(TOKEN_ENV)
    if env:
        return check_token(env, f"${TOKEN_ENV}")
    return load_or_create_token(path)


def bearer_matches(header: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header carries ``token``, compared in constant time."""
    if not header:
        return False
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(value.strip().encode(), token.encode())
