"""Every page byte for byte as today's: a fixed text of 281k characters (code, tabs, long
lines, accents, Cyrillic, CJK, an emoji) rendered for three readers (Claude's, GPT's and Gemini's page sizes) in four shapes, each
render's pages pinned by the SHA-256 of their pixels and of their PNG bytes. A faster
raster, text pass or PNG assembly must keep both (the PNG bytes as long as ISA-L's deflate
is the version pinned here: another version may encode the same pixels otherwise)."""

from __future__ import annotations

import hashlib
import io
import random

import isal
import pytest
from PIL import Image

import glyphpack

#: The ISA-L release whose deflate the PNG digests were taken with.
PINNED_ISAL = "1.9.1"
#: (model, shape) -> (pages, SHA-256 of the pages' PNG bytes, of their pixels), first 16 hex digits.
PINNED = {
    ("claude-sonnet-4-5", "5x8"): (11, "1fc1f426c2bb4e97", "28663cdcf5eff323"),
    ("claude-sonnet-4-5", "9x15-loose"): (44, "0dde9f73fb80f22b", "1f968caab6f6362b"),
    ("claude-sonnet-4-5", "8x13-tall"): (48, "6d10cc5674a62c9e", "a1d6f77b26839556"),
    ("claude-sonnet-4-5", "unifont"): (35, "17f341a3c6f6bea5", "b6cee7e1fc22728d"),
    ("gpt-5.4", "5x8"): (2, "0a4755960e40d244", "904c659c9a900d52"),
    ("gpt-5.4", "9x15-loose"): (9, "dbf76fc2f9c9db0b", "a115dda2608aa83f"),
    ("gemini-3-pro", "9x15-loose"): (13, "f5fe1fa60a6eb838", "dd771ce17d33addf"),
}


def corpus() -> str:
    """The fixed text: 3,000 numbered lines of words drawn with a fixed seed, and a long
    line every 97."""
    rng = random.Random(64)
    words = ["def", "parse(value,", "index):", "return", "value[index]", "+", "0x1f2e3d4c", "naïve", "café", "Ωmega", "日本語のテキスト", "ошибка", "→",
             "\t", "    ", '{"key": [1, 2, 3]}', "—", "😀"]
    lines = []
    for n in range(3000):
        lines.append(f"{n:05d} " + " ".join(rng.choice(words) for _ in range(rng.randint(0, 24))))
        if n % 97 == 0:
            lines.append("x" * rng.randint(200, 900))
    return "\n".join(lines)


@pytest.fixture(scope="module")
def text() -> str:
    return corpus()


@pytest.mark.parametrize(("model", "shape"), sorted(PINNED))
def test_every_page_is_byte_for_byte_as_pinned(text, model, shape):
    pages = glyphpack.render(text, model=model, shape=shape)
    count, png_digest, pixel_digest = PINNED[(model, shape)]
    pixels = hashlib.sha256(b"".join(Image.open(io.BytesIO(p.png)).tobytes() for p in pages)).hexdigest()[:16]
    assert (len(pages), pixels) == (count, pixel_digest)
    if isal.__version__ == PINNED_ISAL:
        assert hashlib.sha256(b"".join(p.png for p in pages)).hexdigest()[:16] == png_digest
