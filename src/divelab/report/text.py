"""Text of claims as a reader sees it: sources cited by the paper, no Python reprs, Markdown-safe cells.

A claim's ``source`` records where its paper value was read, which for most claims is a section of
divelab's working summaries of the papers (files a reader does not have). The report cites the
paper itself instead: its arXiv id, a section of the paper where the source names one, and the
topic words of the source. A note may embed a dict or list printed by Python; the report shows it
as plain "key value" text.
"""

from __future__ import annotations

import ast
import re

# Pieces of a source string that point into divelab's own working files, not into the paper.
_INTERNAL = re.compile(
    r"(?:papers/)?[\w-]+\.md\b(?:[ ,]*§[\w.()]+)*"  # a summary file and its sections
    r"|\bnotes?'?s?\s*§[\w.]+(?:\s*plan)?"             # "notes §1", "notes §1 plan"
    r"|\bweek-in-review(?:\s+E\d+)?"                  # the review, by its file name
    r"|\bpaperdive\b|\bE\d+\b"                      # episode and experiment numbers
    r"|\bissue\s+\d+|\[[VS]\](?:/\[[VS]\])?|\([VS]\)"  # tracker references, evidence tags
    r"|§[\w.()]+"                                   # a bare section: of a summary, not the paper
    r"|\bper the notes\b|\bthe notes\b|\bnotes\b|\bplan\b|\bepisode\b",
    re.I)
_PAPER_SECTION = re.compile(r"arXiv \d{4}\.\d{4,5}\s*(§[\w.()]+)")


def cite(system: str, source: str) -> str:
    """``source`` as a reader can follow it: ``arXiv <id>[ §section][, topic]``.

    >>> cite("world-model", "§4 Three-stage recipe")
    'arXiv 2606.24597, Three-stage recipe'
    """
    from divelab import registry

    try:
        arxiv = f"arXiv {registry.get(system).arxiv}"
    except registry.UnknownSystemError:
        return source
    section = _PAPER_SECTION.search(source)
    rest = _INTERNAL.sub(" ", _PAPER_SECTION.sub(" ", source.replace("arXiv", " arXiv")))
    rest = re.sub(r"\barXiv\s+\d{4}\.\d{4,5}", " ", rest)
    via_review = bool(re.search(r"\breview\b", source, re.I))
    rest = re.sub(r"\breview(?:'s)?\b|\baiweekly\b|[()]", " ", rest, flags=re.I)
    # what is left are topic words; tidy the punctuation that joined the removed pieces
    rest = re.sub(r"\s*([,;/:])(?:\s*[,;/:])+", r"\1", re.sub(r"\s+", " ", rest))
    rest = rest.strip(" ,;/:")
    if source.strip().lower() in ("ours", "divelab"):
        return "divelab's own measure, not the paper's"
    out = arxiv + (f" {section.group(1)}" if section else "")
    if rest:
        out += f", {rest}"
    if via_review:
        out += " (as summarised in the Week in Review)"
    return out


_LITERAL = re.compile(r"\{[^{}]*\}|\[[^\[\]]*\]")
_DETAILS = re.compile(r"details((?:\[['\"][\w-]+['\"]\])+)")


def plain(text: str) -> str:
    """Replace Python dict/list reprs and ``details['a']['b']`` paths by readable text."""
    text = _DETAILS.sub(lambda m: "details → " + " → ".join(re.findall(r"['\"]([\w-]+)['\"]", m.group(1)))
                        + " (results.json)", text)

    def one(m: re.Match[str]) -> str:
        try:
            value = ast.literal_eval(m.group(0))
        except (ValueError, SyntaxError):
            return m.group(0)
        if isinstance(value, dict):
            return "; ".join(f"{k} {v}" for k, v in value.items())
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return ", ".join(value)
        return m.group(0)

    return _LITERAL.sub(one, text)


def md_cell(x: object) -> str:
    """One Markdown table cell: pipes, newlines and brackets escaped (a ``[a] [b]`` pair would
    otherwise be read as a reference link and lose its text)."""
    return (str(x).replace("|", "\\|").replace("\n", " ")
            .replace("[", "\\[").replace("]", "\\]"))
