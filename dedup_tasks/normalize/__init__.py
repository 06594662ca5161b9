"""URL canonicalization, text normalization and tokenization."""

from dedup_tasks.normalize.text import detect_lang, normalize_text, strip_boilerplate, token_text
from dedup_tasks.normalize.tokens import segment_words, shingles
from dedup_tasks.normalize.url import InvalidURL, UrlKeys, canonical_url, url_keys

__all__ = [
    "InvalidURL",
    "UrlKeys",
    "canonical_url",
    "detect_lang",
    "normalize_text",
    "segment_words",
    "shingles",
    "strip_boilerplate",
    "token_text",
    "url_keys",
]
