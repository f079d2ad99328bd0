"""library.py — the Redis function library this client speaks (docs/redis-functions.md,
"Versioning"): finding its text, reading its version, and making sure Redis has it.
Where the text comes from, first found wins: the `library` argument (text, a file, or a
directory holding one ratelimit_<version>.lua; or Library(version, None) for one already
loaded), RATELIMIT_REDIS_LIBRARY, the copy bundled in the package (ratelimit_client/library/, put there
by setup.py's build step from a ratelimit build; issue 31 defect 5), /usr/share/ratelimit/redis
and /usr/local/share/ratelimit/redis (the install of ratelimit's build)."""
import os
import re
from dataclasses import dataclass
from typing import Optional

from redis.exceptions import ResponseError

from .errors import RateLimitError

_HEADER = re.compile(r"^#!lua name=ratelimit_([0-9a-f]{12})\n")
_FILE = re.compile(r"^ratelimit_[0-9a-f]{12}\.lua$")
_INSTALLED = ("/usr/share/ratelimit/redis", "/usr/local/share/ratelimit/redis")
_BUNDLED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "library")


@dataclass(frozen=True)
class Library:
    version: str           # 12 lower-case hex digits
    text: Optional[str]    # FUNCTION LOAD-able text; None when only the version is known


def parse_library(text: str) -> Library:
    m = _HEADER.match(text)
    if not m:
        raise RateLimitError("library_missing", "not a ratelimit function library (its first line must be '#!lua name=ratelimit_<12 hex digits>')")
    return Library(m.group(1), text)


def _from_path(p: str) -> Library:
    if os.path.isdir(p):
        found = sorted(f for f in os.listdir(p) if _FILE.match(f))
        if len(found) != 1:
            raise RateLimitError("library_missing", f"{p} holds {len(found)} ratelimit_<version>.lua files, expected exactly one")
        p = os.path.join(p, found[0])
    with open(p, encoding="utf-8") as f:
        return parse_library(f.read())


def find_library(option=None) -> Library:
    if isinstance(option, Library):
        return option
    if isinstance(option, str):
        return parse_library(option) if option.startswith("#!lua") else _from_path(option)
    env = os.environ.get("RATELIMIT_REDIS_LIBRARY")
    if env:
        return _from_path(env)
    for d in (_BUNDLED,) + _INSTALLED:
        if os.path.isdir(d):
            return _from_path(d)
    raise RateLimitError("library_missing", "no ratelimit function library: pass library= (the file share/ratelimit/redis/ratelimit_<version>.lua of a ratelimit build or install), set RATELIMIT_REDIS_LIBRARY, or install a package built from a ratelimit build (it bundles one)")


def _listed_names(listed) -> list:
    names = []
    for entry in listed or []:
        if isinstance(entry, dict):
            name = entry.get("library_name") or entry.get(b"library_name")
            if name is not None:
                names.append(name.decode() if isinstance(name, bytes) else str(name))
            continue
        fields = list(entry)
        for i in range(0, len(fields) - 1, 2):
            k = fields[i].decode() if isinstance(fields[i], bytes) else fields[i]
            if k == "library_name":
                v = fields[i + 1]
                names.append(v.decode() if isinstance(v, bytes) else str(v))
    return names


def missing_error(lib: Library, names: list, load_error: str) -> RateLimitError:
    have = ", ".join(names) if names else "no ratelimit library"
    return RateLimitError(
        "library_missing",
        f"Redis does not have the ratelimit function library version {lib.version} that this client speaks{load_error}; "
        f"it has {have}. Load this client's copy (redis-cli -x FUNCTION LOAD < ratelimit_{lib.version}.lua), "
        "or give the client the text so it loads it itself; other versions may stay loaded beside it.")


def ensure_library(execute, lib: Library) -> None:
    """Loads `lib` (when it has the text) or checks it is loaded; `execute(*args)` runs one command.
    Only a refusal by Redis falls back to FUNCTION LIST; a timeout or lost connection propagates
    (the caller's failure policy answers after one timeout, not two: issue 31 defect 3)."""
    load_error = ""
    if lib.text is not None:
        try:
            execute("FUNCTION", "LOAD", lib.text)
            return
        except ResponseError as e:  # Redis refused it: the listing says why; no answer propagates
            if "already exists" in str(e):
                return
            load_error = f" (FUNCTION LOAD failed: {e})"
    names = _listed_names(execute("FUNCTION", "LIST", "LIBRARYNAME", "ratelimit_*"))
    if f"ratelimit_{lib.version}" not in names:
        raise missing_error(lib, names, load_error)


async def ensure_library_async(execute, lib: Library) -> None:
    """ensure_library with an awaitable `execute`."""
    load_error = ""
    if lib.text is not None:
        try:
            await execute("FUNCTION", "LOAD", lib.text)
            return
        except ResponseError as e:
            if "already exists" in str(e):
                return
            load_error = f" (FUNCTION LOAD failed: {e})"
    names = _listed_names(await execute("FUNCTION", "LIST", "LIBRARYNAME", "ratelimit_*"))
    if f"ratelimit_{lib.version}" not in names:
        raise missing_error(lib, names, load_error)
