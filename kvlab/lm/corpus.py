"""The text kvlab scores the model on, shipped inside the package.

``data/bartleby.txt``: the first ~40 KB (about 9,500 tokens) of Herman Melville's "Bartleby, the
Scrivener. A Story of Wall-Street" (1853), public domain; text from the Project Gutenberg edition
(EBook #11231), with the line breaks inside paragraphs joined and double spaces after sentences
made single.
"""

from __future__ import annotations

from importlib import resources

CORPUS_SOURCE = ('Herman Melville, "Bartleby, the Scrivener" (1853), public domain; '
                 "Project Gutenberg EBook #11231, first ~40 KB")


def corpus_text() -> str:
    """The shipped prose (UTF-8, paragraphs separated by blank lines)."""
    return resources.files("kvlab.lm").joinpath("data/bartleby.txt").read_text(encoding="utf-8")
