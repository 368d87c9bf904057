"""Product code says why beside the code: no comment, docstring or string of it cites a docs section.

Section titles change when the docs are rewritten, and docs/performance.md holds runs' figures, which age with the
code they measured; a citation of either leaves the reason elsewhere and lets it go stale.
"""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("dqn", "actor", "learner", "replay_server", "evaluator", "launcher")

#: A Markdown anchor (`design.md#memory`), or a docs file followed by a quoted section title, also across a line
#: break and a comment's `#` (`docs/design.md, "Python<->TF boundary"`); docs/performance.md in any form.
CITATION = re.compile(r"[\w/.-]+\.md#[\w-]+"
                      r"|[\w/.-]+\.md\)?,?(?:\s|#)+(?:\"[^\"\n]+\"|'[^'\n]+'|“[^”\n]+”)"
                      r"|performance\.md")


def citations(text: str) -> list[str]:
    """The docs-section citations in a source text."""
    return [match.group(0) for match in CITATION.finditer(text)]


def test_the_check_finds_each_form():
    for cited in ('(docs/performance.md, "Learning model")', 'docs/performance.md "Breakout (Atari)"',
                  "see [tuning](defaults.md#gamma)", '(see docs/design.md,\n    # "Python<->TF boundary and memory")',
                  "figures in docs/performance.md)"):
        assert citations(cited), cited
    for plain in ("docs/defaults.md says why each is what it is", "[defaults.md](defaults.md)",
                  'the learner logs "train step %d"'):
        assert not citations(plain), plain


def test_product_code_cites_no_docs_section():
    sources = sorted(path for package in PACKAGES for path in (REPO / package).rglob("*.py"))
    hits = [f"{path.relative_to(REPO)}: {cited!r}" for path in sources for cited in citations(path.read_text())]
    assert not hits, "say why beside the code instead of citing the docs:\n" + "\n".join(hits)
