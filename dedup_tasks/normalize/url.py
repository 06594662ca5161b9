"""Canonical crawl URLs and their 64-bit keys (layer L1 of the cascade, DESIGN.md "L1 URL").

Two URLs get the same canonical form when a crawler fetching them would get the same page in all
but pathological cases. The canonical form is only ever hashed and compared, never fetched, so it
may be stricter than what a browser sends.

Decisions (each one is a trade-off between missed duplicates and false merges; a false merge at L1
is cheap because a repeat whose content changed is kept as an update, see DESIGN.md):

* Only ``http`` and ``https`` are crawl URLs. Other schemes, relative and scheme-less references
  are rejected: crawl records carry absolute URLs, and guessing a scheme would invent identity.
* Parsing follows the WHATWG URL standard where crawlers meet it (leading/trailing C0 controls and
  spaces stripped, tab/CR/LF removed anywhere, ``\\`` read as ``/``, ``http:example.com`` and
  ``http:///example.com`` read as host ``example.com``, WHATWG IPv4 forms such as ``0x7f.1`` or
  ``3279880203`` turned into dotted decimal, IPv6 compressed).
* Scheme and host are lower-cased. Non-ASCII labels go through IDNA (stdlib codec, IDNA 2003, so
  ``faß`` becomes ``fass``); a label the codec refuses only for reasons that do not make the host
  invalid (e.g. a non-ASCII label that starts with ``xn--``) is kept lower-cased. Trailing dots of
  the host are dropped (``example.com.`` resolves to the same site).
* ``www.`` is kept: ``www.example.com`` and ``example.com`` are different hosts that may serve
  different sites; when they mirror each other the content layers catch it.
* Userinfo is dropped: it is sent as an Authorization header, not as part of the resource name;
  keeping it would store credentials in keys and in the registry.
* Default ports (80/http, 443/https) and an empty port are dropped; leading zeros of a port too.
* The fragment is dropped: it is never sent to the server, so the fetched page is the same
  (this includes ``#!`` hash-bang URLs; Google's ``_escaped_fragment_`` scheme is retired).
* Path: percent-escapes get upper-case hex; escapes of unreserved characters and of the
  sub-delimiters without a parsing role (``! $ & ' ( ) * ,`` and ``: @``) are decoded; ``%2F``,
  ``%3F``, ``%23``, ``%25``, ``%3B`` (servlet path parameters), ``%3D`` and ``%2B`` stay encoded
  because servers split or decode them differently; characters that must not appear literally
  (space, quotes, non-ASCII as UTF-8, ...) are encoded; a lone ``%`` becomes ``%25``. Decoding
  happens once: ``%2525`` is not ``%``. Dot segments are resolved. Empty segments (``//``) are
  kept: they are significant for some servers (S3 keys, URLs embedded in paths).
* Trailing slash folded: ``/a/b/`` and ``/a/b`` are one page for nearly every server; the root
  stays ``/`` and an empty path becomes ``/``.
* Query: read as ``application/x-www-form-urlencoded`` (what servers do): split on ``&``, ``+`` is
  a space, escapes decoded to bytes (invalid UTF-8 kept as is) and re-encoded in one canonical way;
  a key without ``=`` equals the key with an empty value (``?a`` == ``?a=``, as in Scrapy/w3lib);
  empty pairs dropped; tracking parameters removed (names compared case-insensitively after
  decoding, a trailing ``*`` is a prefix wildcard); pairs sorted by key, then value; an empty
  query is dropped. ``;`` is not a separator (few servers treat it as one).
* No Unicode normalization of decoded bytes and no case folding of path or query: servers compare
  bytes.

The 64-bit key (``url_keys``) names the *page*, not the spelling: it hashes the canonical URL with
``https`` written as ``http``, as a crawler's SURT form drops the scheme (Heritrix, Common Crawl). A
page refetched over the other scheme is the same page to L1: a repeat when its content is the same,
an update (held to the update rule) when it changed. Writing https as http rather than dropping the
scheme keeps every key a registry holds for an http URL valid.
"""

from __future__ import annotations

import encodings.idna
import ipaddress
import re
import stringprep
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from string import hexdigits
from urllib.parse import quote, quote_plus, unquote_to_bytes

import numpy as np
import xxhash

from dedup_tasks.config import DEFAULT_TRACKING_PARAMS

__all__ = ["InvalidURL", "UrlKeys", "canonical_url", "canonicalize_each", "page_identity", "url_key", "url_keys"]


class InvalidURL(ValueError):
    """The URL cannot be a crawl URL; ``reason`` is short and URL-free, fit for a decision row."""

    def __init__(self, reason: str, url: object = None) -> None:
        self.reason = reason
        self.url = url
        if isinstance(url, str):
            shown = url if len(url) <= 120 else url[:117] + "..."
            super().__init__(f"{reason} (url {shown!r})")
        else:
            super().__init__(reason)


@dataclass
class UrlKeys:
    """Per-URL results of :func:`url_keys`, aligned with its input."""

    key: np.ndarray  # uint64, 0 where invalid
    valid: np.ndarray  # bool
    host: np.ndarray  # object: canonical host (no port) or None
    reason: np.ndarray  # object: None, or why the URL is invalid

    def __len__(self) -> int:
        return len(self.key)


# ---- character classes ------------------------------------------------------------------------
# WHATWG strips C0 controls and space around the input, and tab/LF/CR everywhere.
_C0_AND_SPACE = "".join(chr(i) for i in range(0x21))
_TAB_NEWLINE = str.maketrans("", "", "\t\n\r")
_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")
_AUTHORITY_END_RE = re.compile(r"[/\\?#]")
_DEFAULT_PORT = {"http": "80", "https": "443"}

# Hosts that need nothing but lower-casing (the common case).
_SIMPLE_HOST_RE = re.compile(r"[a-z0-9_.\-]+")
# WHATWG forbidden domain code points (ASCII part); non-ASCII is handled by IDNA.
_FORBIDDEN_HOST_RE = re.compile(r"[\x00-\x20#%/:<>?@\[\\\]^|\x7f]")
_IDNA_DOTS_RE = re.compile("[.\u3002\uff0e\uff61]")
# Characters IDNA 2003 maps differently from IDNA 2008/UTS 46; a punycode label may contain them.
_IDNA_DEVIATIONS = str.maketrans({"ß": "ss", "ς": "σ", "\u200c": None, "\u200d": None})
# Lower-case letters that nameprep leaves unchanged and that carry no bidi or prohibition rule:
# Latin-1, Cyrillic, kana, CJK unified ideographs, Hangul syllables (checked in the tests).
_IDNA_STABLE_RE = re.compile(
    "[a-z0-9\\-\u00e0-\u00f6\u00f8-\u00ff\u0430-\u044f\u3041-\u3096\u30a1-\u30fa\u4e00-\u9fff\uac00-\ud7a3]+"
)
_IDNA_KEPT = "ßς"
_IDNA_KEPT_RE = re.compile("([ßς])")

_UNRESERVED = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
# Path characters allowed literally (RFC 3986 pchar and "/").
_PATH_SAFE = "!$&'()*+,;=:@/"
# Escapes decoded in the path: unreserved, plus reserved characters no common server treats
# differently encoded or not. ";", "=", "+" stay encoded (path parameters, "+" as space).
_PATH_DECODE = _UNRESERVED + "!$&'()*,:@"
_PATH_CANONICAL_RE = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@/]*")
_ESCAPE_RE = re.compile(r"%[0-9A-Fa-f]{2}|%")


def _escape_table() -> dict[str, str]:
    table = {}
    for byte in range(256):
        upper = f"%{byte:02X}"
        char = chr(byte)
        canonical = char if char in _PATH_DECODE else upper
        for hi in {upper[1], upper[1].lower()}:
            for lo in {upper[2], upper[2].lower()}:
                table[f"%{hi}{lo}"] = canonical
    return table


_PATH_ESCAPES = _escape_table()


def _path_escape(match: re.Match[str]) -> str:
    return _PATH_ESCAPES.get(match.group(), "%25")


# Query: decoded form is re-encoded with these characters left literal ("&", "=" in keys, "+",
# ";", "#", "%" and everything outside RFC 3986's query set are escaped).
_QUERY_KEY_SAFE = "!$()*,/:@?"
_QUERY_VALUE_SAFE = _QUERY_KEY_SAFE + "="
# Already canonical as written ("+" is the canonical spelling of a space).
_QUERY_KEY_CANONICAL_RE = re.compile(r"[A-Za-z0-9\-._~!$()*,/:@?+]*")
_QUERY_VALUE_CANONICAL_RE = re.compile(r"[A-Za-z0-9\-._~!$()*,/:@?+=]*")


# ---- tracking parameters ----------------------------------------------------------------------
@dataclass(frozen=True)
class _TrackingMatcher:
    exact: frozenset[str]
    prefixes: tuple[str, ...]

    def __call__(self, name: str) -> bool:
        return name in self.exact or (bool(self.prefixes) and name.startswith(self.prefixes))


def _tracking_matcher(params: Iterable[str]) -> _TrackingMatcher:
    exact, prefixes = set(), []
    for raw in params:
        name = str(raw).strip().lower()
        if name.endswith("*"):
            stem = name[:-1]
            if "*" in stem:
                raise ValueError(f"tracking parameter {raw!r}: only a trailing '*' is supported")
            prefixes.append(stem)
        elif "*" in name:
            raise ValueError(f"tracking parameter {raw!r}: only a trailing '*' is supported")
        elif name:
            exact.add(name)
    return _TrackingMatcher(frozenset(exact), tuple(prefixes))


_DEFAULT_MATCHER = _tracking_matcher(DEFAULT_TRACKING_PARAMS)


def _matcher_for(params: Iterable[str]) -> _TrackingMatcher:
    # Identity check, not a cache: the default list is compiled once at import.
    return _DEFAULT_MATCHER if params is DEFAULT_TRACKING_PARAMS else _tracking_matcher(params)


# ---- host -------------------------------------------------------------------------------------
def _ipv4_number(part: str) -> int | None:
    if part.startswith("0x"):
        digits = part[2:]
        if not all(c in hexdigits for c in digits):
            return None
        return int(digits, 16) if digits else 0
    if not (part.isascii() and part.isdigit()):
        return None
    if len(part) > 1 and part[0] == "0":
        return int(part[1:], 8) if all(c in "01234567" for c in part) else None
    return int(part)


_NUMBER_END = "0123456789abcdefx"


def _ends_in_number(host: str) -> bool:
    last = host.rpartition(".")[2]
    if last.isascii() and last.isdigit():
        return True
    return last.startswith("0x") and all(c in hexdigits for c in last[2:])


def _ipv4(host: str) -> str:
    """WHATWG IPv4 parser: a host ending in a number must be an IPv4 address."""
    parts = host.split(".")
    if len(parts) > 4 or "" in parts:
        raise InvalidURL("unparsable url: bad IPv4 address")
    numbers = [_ipv4_number(p) for p in parts]
    if None in numbers or any(n > 255 for n in numbers[:-1]):  # type: ignore[operator]
        raise InvalidURL("unparsable url: bad IPv4 address")
    value = numbers[-1]
    if value >= 256 ** (5 - len(numbers)):  # type: ignore[operator]
        raise InvalidURL("unparsable url: bad IPv4 address")
    for i, n in enumerate(numbers[:-1]):
        value += n * 256 ** (3 - i)  # type: ignore[operator]
    return ".".join(str((value >> s) & 255) for s in (24, 16, 8, 0))


def _check_punycode_label(label: str) -> None:
    """An ASCII "xn--" label from the input must be a valid A-label (WHATWG rejects the rest)."""
    try:
        decoded = label[4:].encode("ascii").decode("punycode")
    except (UnicodeError, ValueError, IndexError) as exc:
        raise InvalidURL("unparsable url: bad punycode host label") from exc
    # A valid A-label decodes to a non-empty, non-ASCII label that IDNA maps to itself.
    if not decoded or decoded.isascii():
        raise InvalidURL("unparsable url: bad punycode host label")
    try:
        mapped = encodings.idna.nameprep(decoded)
    except UnicodeError as exc:
        raise InvalidURL("unparsable url: bad punycode host label") from exc
    if mapped != decoded and mapped != decoded.translate(_IDNA_DEVIATIONS):
        raise InvalidURL("unparsable url: bad punycode host label")


def _check_punycode_labels(host: str) -> None:
    for label in host.split("."):
        if label.startswith("xn--"):
            _check_punycode_label(label)


def _prohibited(label: str) -> bool:
    # Same tables nameprep rejects: controls, private use, non-characters, U+FFFD, bidi controls...
    for c in label:
        if (
            stringprep.in_table_c12(c)
            or stringprep.in_table_c22(c)
            or stringprep.in_table_c3(c)
            or stringprep.in_table_c4(c)
            or stringprep.in_table_c5(c)
            or stringprep.in_table_c6(c)
            or stringprep.in_table_c7(c)
            or stringprep.in_table_c8(c)
            or stringprep.in_table_c9(c)
        ):
            return True
    return False


def _idna_label(label: str) -> str:
    lowered = label.lower()
    if not lowered.isascii() and not lowered.startswith("xn--") and _IDNA_STABLE_RE.fullmatch(lowered):
        # nameprep maps these to themselves and they pass all its checks: skip it, it is the slow step.
        ace = "xn--" + lowered.encode("punycode").decode("ascii")
        if len(ace) < 64:
            return ace
    try:
        if "ß" in label or "ς" in label:
            # Browsers use UTS 46 non-transitional processing: "faß.de" is xn--fa-hia.de, not the
            # different domain fass.de that the stdlib's IDNA 2003 codec maps it to.
            mapped = "".join(
                p if p in _IDNA_KEPT else encodings.idna.nameprep(p) for p in _IDNA_KEPT_RE.split(label)
            )
            return "xn--" + mapped.encode("punycode").decode("ascii")
        return encodings.idna.ToASCII(label).decode("ascii").lower()
    except UnicodeError:
        pass
    # Fallback to lower-casing only if the label is otherwise valid.
    if all(stringprep.in_table_b1(c) for c in label):
        raise InvalidURL("unparsable url: empty host label after IDNA mapping") from None
    if _prohibited(label):
        raise InvalidURL("unparsable url: prohibited character in host") from None
    return label.lower()


def _canonical_host(host: str) -> str:
    if host.isascii():
        h = host.lower()
        if _SIMPLE_HOST_RE.fullmatch(h) is None:
            h = _complex_host(h)
        elif "xn--" in h:
            _check_punycode_labels(h)
    else:
        h = _complex_host(host)
    h = h.rstrip(".")
    if not h:
        raise InvalidURL("unparsable url: empty host")
    if h[-1] in _NUMBER_END and _ends_in_number(h):
        return _ipv4(h)
    return h


def _complex_host(host: str) -> str:
    if host.startswith("["):
        if not host.endswith("]") or "%" in host:
            raise InvalidURL("unparsable url: bad IPv6 address")
        try:
            return f"[{ipaddress.IPv6Address(host[1:-1]).compressed}]"
        except ValueError as exc:
            raise InvalidURL("unparsable url: bad IPv6 address") from exc
    if "%" in host:
        try:
            host = unquote_to_bytes(host).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidURL("unparsable url: host percent-escapes are not UTF-8") from exc
    if host.isascii():
        host = host.lower()
        if "xn--" in host:
            _check_punycode_labels(host)
    else:
        labels = []
        for label in _IDNA_DOTS_RE.split(host):
            if label.isascii():
                label = label.lower()
                if label.startswith("xn--"):
                    _check_punycode_label(label)
            else:
                # Labels we produce here are valid A-labels or deliberate fallbacks: not re-checked.
                label = _idna_label(label)
            labels.append(label)
        host = ".".join(labels)
    bad = _FORBIDDEN_HOST_RE.search(host)
    if bad is not None:
        raise InvalidURL(f"unparsable url: forbidden character {bad.group()!r} in host")
    return host


# ---- path and query ---------------------------------------------------------------------------
def _remove_dot_segments(path: str) -> str:
    out: list[str] = []
    for segment in path.split("/")[1:]:
        if segment == "..":
            if out:
                out.pop()
        elif segment != ".":
            out.append(segment)
    return "/" + "/".join(out)


def _canonical_path(path: str) -> str:
    if not path:
        return "/"
    if "\\" in path:
        path = path.replace("\\", "/")
    if _PATH_CANONICAL_RE.fullmatch(path) is None:
        path = _ESCAPE_RE.sub(_path_escape, quote(path, safe=_PATH_SAFE + "%"))
    if "/." in path:
        path = _remove_dot_segments(path)
    if path[-1] == "/":
        path = path.rstrip("/") or "/"
    return path


def _canonical_query(query: str, is_tracking: _TrackingMatcher) -> str:
    pairs = []
    for part in query.split("&"):
        if not part:
            continue
        key, _, value = part.partition("=")
        if _QUERY_KEY_CANONICAL_RE.fullmatch(key) is None:
            raw = unquote_to_bytes(key.replace("+", " "))
            name = raw.decode("utf-8", "replace").lower()
            key = quote_plus(raw, safe=_QUERY_KEY_SAFE)
        else:
            name = key.replace("+", " ").lower() if "+" in key else key.lower()
        if is_tracking(name):
            continue
        if _QUERY_VALUE_CANONICAL_RE.fullmatch(value) is None:
            value = quote_plus(unquote_to_bytes(value.replace("+", " ")), safe=_QUERY_VALUE_SAFE)
        pairs.append((key, value))
    if not pairs:
        return ""
    pairs.sort()
    return "?" + "&".join(f"{k}={v}" for k, v in pairs)


# ---- public API -------------------------------------------------------------------------------
def _canonicalize(url: object, is_tracking: _TrackingMatcher) -> tuple[str, str]:
    """Return (canonical URL, canonical host) or raise InvalidURL."""
    if not isinstance(url, str):
        if _is_missing(url):
            raise InvalidURL("null url")
        raise InvalidURL(f"unparsable url: not a string ({type(url).__name__})")
    s = url.strip(_C0_AND_SPACE)
    if "\t" in s or "\n" in s or "\r" in s:
        s = s.translate(_TAB_NEWLINE)
    if not s:
        raise InvalidURL("empty url", url)
    if not s.isascii():
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidURL("unparsable url: not encodable as UTF-8 (lone surrogate)", url) from None

    colon = s.find(":")
    scheme = s[:colon] if colon > 0 else ""
    if scheme != "http" and scheme != "https":
        if not scheme or _SCHEME_RE.fullmatch(scheme) is None:
            raise InvalidURL("unparsable url: no scheme (relative or scheme-less url)", url)
        scheme = scheme.lower()
        if scheme != "http" and scheme != "https":
            shown = scheme if len(scheme) <= 24 else scheme[:21] + "..."
            raise InvalidURL(f"unsupported scheme: {shown}", url)

    # WHATWG "special authority ignore slashes": any run of / and \ before the host.
    rest = s[colon + 1 :].lstrip("/\\")
    end = _AUTHORITY_END_RE.search(rest)
    if end is None:
        authority, rest = rest, ""
    else:
        authority, rest = rest[: end.start()], rest[end.start() :]
    at = authority.rfind("@")
    if at >= 0:
        authority = authority[at + 1 :]

    if authority.startswith("["):
        close = authority.find("]") + 1
        if close == 0:
            raise InvalidURL("unparsable url: bad IPv6 address", url)
        host, port = authority[:close], authority[close:]
        if port:
            if port[0] != ":":
                raise InvalidURL("unparsable url: bad IPv6 address", url)
            port = port[1:]
    else:
        host, _, port = authority.partition(":")
    if not host:
        raise InvalidURL("unparsable url: empty host", url)
    if port:
        if not (port.isascii() and port.isdigit()) or int(port) > 65535:
            shown = port if len(port) <= 12 else port[:9] + "..."
            raise InvalidURL(f"unparsable url: bad port {shown!r}", url)
        port = str(int(port))
        port = "" if port == _DEFAULT_PORT[scheme] else ":" + port
    try:
        host = _canonical_host(host)
    except InvalidURL as exc:
        raise InvalidURL(exc.reason, url) from None

    hash_at = rest.find("#")
    if hash_at >= 0:
        rest = rest[:hash_at]
    path, _, query = rest.partition("?")
    path = _canonical_path(path)
    query = _canonical_query(query, is_tracking) if query else ""
    return f"{scheme}://{host}{port}{path}{query}", host


def page_identity(canonical: str) -> str:
    """What the URL key hashes: the canonical URL with ``https`` written as ``http`` (one page over
    either scheme; see the module docstring)."""
    return "http" + canonical[5:] if canonical.startswith("https://") else canonical


def canonical_url(url: str, tracking_params: Iterable[str] = DEFAULT_TRACKING_PARAMS) -> str:
    """The canonical form of a crawl URL (see the module docstring for every rule).

    Raises InvalidURL for null, empty, unparsable and non-http(s) URLs.
    """
    return _canonicalize(url, _matcher_for(tracking_params))[0]


def _is_missing(value: object) -> bool:
    if value is None:
        return True
    try:
        return bool(value != value)  # NaN
    except (TypeError, ValueError):
        return True  # pandas.NA and friends refuse bool()


def url_key(canonical: str) -> int:
    """L1's key of a canonical URL: xxh64 of its page identity (one page over either scheme)."""
    return xxhash.xxh64_intdigest(page_identity(canonical).encode("utf-8"))


def canonicalize_each(
    urls: Iterable[object], tracking_params: Iterable[str] = DEFAULT_TRACKING_PARAMS
) -> Iterator[tuple[str | None, str | None, str | None]]:
    """Per URL (canonical URL, host, reason): a bad URL never raises, it gets no canonical form and the
    reason L1 records for it."""
    is_tracking = _matcher_for(tracking_params)
    for url in urls:
        try:
            canonical, host = _canonicalize(url, is_tracking)
        except InvalidURL as exc:
            yield None, None, exc.reason
        except Exception as exc:  # noqa: BLE001 - a batch must survive any single URL, even a bug here
            yield None, None, f"unparsable url: {type(exc).__name__}"
        else:
            yield canonical, host, None


def url_keys(urls: Sequence[str | None], tracking_params: Iterable[str] = DEFAULT_TRACKING_PARAMS) -> UrlKeys:
    """Canonicalize a batch and hash it; a bad URL never raises, its row gets a reason instead.

    ``urls`` may be any sequence, a pandas Series or a pyarrow (Chunked)Array.
    """
    if hasattr(urls, "to_pylist"):
        urls = urls.to_pylist()
    n = len(urls)
    key = np.zeros(n, dtype=np.uint64)
    valid = np.zeros(n, dtype=bool)
    host = np.full(n, None, dtype=object)
    reason = np.full(n, None, dtype=object)
    for i, (canonical, host[i], reason[i]) in enumerate(canonicalize_each(urls, tracking_params)):
        if canonical is not None:
            key[i] = url_key(canonical)
            valid[i] = True
    return UrlKeys(key=key, valid=valid, host=host, reason=reason)
