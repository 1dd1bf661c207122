"""One spelling for every identifier a paper has in the open sources, so that a paper met in two
sources (or cited by one and described by another) is one stored paper.

Why: each source spells ids its own way: OpenAlex writes ``https://openalex.org/W2741809807`` and
``https://doi.org/10.7717/PEERJ.4375``, S2AG writes ``{"DOI": "10.7717/peerj.4375", "CorpusId":
"123"}``, arXiv ``0704.0001`` (and ``math.GT/0309136v2`` in old references), PubMed URLs or bare
numbers. Citations join on these strings, so they must agree exactly.

The spellings (a *ref*, what ``citations.cited_ref`` and ``citation_edges`` hold):

============  =================================  ===========================================
id            ref                                kept in
============  =================================  ===========================================
DOI           ``10.7717/peerj.4375`` (lower)     ``papers.doi``
arXiv         ``0704.0001``, ``cs/0101001``      ``papers.arxiv`` (no version, no subject class)
ACL           ``P18-1001``                       ``papers.acl_id``
OpenAlex      ``openalex:W2741809807``           ``paper_ids`` (the paper's key is ``W2741809807``)
S2 corpus id  ``corpusid:215416146``             ``paper_ids``
S2 paper id   ``s2:<40 hex digits>``             ``paper_ids``
MAG           ``mag:2741809807``                 ``paper_ids``
PubMed        ``pmid:29456894``                  ``paper_ids``
PubMed Cen.   ``pmcid:5815332``                  ``paper_ids``
DBLP          ``dblp:journals/x/Turing50``       ``paper_ids``
============  =================================  ===========================================

A DataCite arXiv DOI (``10.48550/arXiv.1706.03762``) names the arXiv preprint, so it is spelled
as the arXiv id: the preprint and its journal version (which has a DOI of its own) then meet on
the arXiv id that both carry.

Every pattern here is anchored and has no nested repetition: ids come from user files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..records import normalize_arxiv, normalize_doi

# Schemes kept in ``paper_ids`` (the others have columns of their own).
SCHEMES = ("openalex", "corpusid", "s2", "mag", "pmid", "pmcid", "dblp")

_DIGITS = re.compile(r"\d{1,20}")
_OPENALEX = re.compile(r"(?:https?://(?:api\.)?openalex\.org/(?:works/)?|openalex:)?([Ww]\d{1,15})", re.I)
_SHA = re.compile(r"[0-9a-f]{40}")
_PUBMED_URL = re.compile(
    r"https?://(?:www\.)?(?:pubmed\.ncbi\.nlm\.nih\.gov|ncbi\.nlm\.nih\.gov/pubmed)/(\d{1,12})/?"
)
_PMC_URL = re.compile(r"https?://(?:www\.)?ncbi\.nlm\.nih\.gov/pmc/articles/(?:PMC)?(\d{1,12})/?", re.I)
_PMC = re.compile(r"(?:PMC)?(\d{1,12})", re.I)
_ARXIV_DOI = re.compile(r"10\.48550/arxiv\.(\S{1,64})")
_DOI_REF = re.compile(r"(?:https?://(?:dx\.)?doi\.org/|doi:\s{0,5})?10\.\d{4,9}/\S", re.I)
# What indexer/citations.py always read as a DOI, whatever followed.
_DOI_PREFIXES = (
    "10.",
    "doi:",
    "https://doi.org/",
    "http://doi.org/",
    "http://dx.doi.org/",
    "https://dx.doi.org/",
)
# Old-style ids as references write them: ``math.GT/0309136v2``; the id is ``math/0309136``.
_OLD_ARXIV = re.compile(r"([a-z][a-z-]{0,19})(?:\.[a-z]{2})?/(\d{7})", re.I)
_PREFIX = re.compile(r"([A-Za-z]{2,10}):\s{0,3}(\S.{0,300})")
_PREFIX_SCHEMES = {
    "corpusid": "corpusid",
    "mag": "mag",
    "pmid": "pmid",
    "pubmed": "pmid",
    "pmcid": "pmcid",
    "pmc": "pmcid",
    "openalex": "openalex",
    "s2": "s2",
    "dblp": "dblp",
}


def scheme_ref(scheme: str, value: object) -> str:
    """``scheme:value`` in its one spelling, or ``""`` when ``value`` is not such an id (a MAG id
    must be digits, an OpenAlex work id ``W`` and digits...): a malformed id is dropped rather than
    stored where it could join two unrelated papers."""
    if value is None or isinstance(value, bool):
        return ""
    text = str(value).strip()
    if not text:
        return ""
    if scheme == "openalex":
        m = _OPENALEX.fullmatch(text)
        return f"openalex:W{m.group(1)[1:]}" if m else ""
    if scheme in ("corpusid", "mag"):
        return f"{scheme}:{int(text)}" if _DIGITS.fullmatch(text) else ""
    if scheme == "pmid":
        m = _PUBMED_URL.fullmatch(text)
        text = m.group(1) if m else text
        return f"pmid:{int(text)}" if _DIGITS.fullmatch(text) else ""
    if scheme == "pmcid":
        m = _PMC_URL.fullmatch(text) or _PMC.fullmatch(text)
        return f"pmcid:{int(m.group(1))}" if m else ""
    if scheme == "s2":
        return f"s2:{text.lower()}" if _SHA.fullmatch(text.lower()) else ""
    if scheme == "dblp":
        return f"dblp:{text}" if " " not in text and len(text) < 200 else ""
    raise ValueError(f"unknown id scheme {scheme!r} (one of {', '.join(SCHEMES)})")


def openalex_key(value: object) -> str:
    """``W2741809807`` from any spelling of an OpenAlex work id (``""`` if it is not one)."""
    ref = scheme_ref("openalex", value)
    return ref.split(":", 1)[1] if ref else ""


def arxiv_id(value: object) -> str:
    """An arXiv id without prefix, version or subject class (``""`` for a non-string)."""
    if not isinstance(value, str) or not value.strip():
        return ""
    aid = normalize_arxiv(value)
    m = _OLD_ARXIV.fullmatch(aid)
    return f"{m.group(1).lower()}/{m.group(2)}" if m else aid


def split_doi(doi: object) -> tuple[str, str]:
    """``(doi, arxiv)`` of a DOI: a DataCite arXiv DOI also gives the arXiv id it names."""
    if not isinstance(doi, str):
        return "", ""
    norm = normalize_doi(doi)
    m = _ARXIV_DOI.fullmatch(norm)
    return norm, (arxiv_id(m.group(1)) if m else "")


def canonical_ref(raw: str) -> str:
    """Any written id (``https://doi.org/10.1/X``, ``arXiv:cs/0101001v2``, ``CorpusId:123``,
    ``PMID: 42``, ``https://openalex.org/W1``) in its one spelling; anything else stripped only
    (an Anthology id, a BibTeX key)."""
    ref = (raw or "").strip()
    if not ref:
        return ""
    if ref.lower().startswith(_DOI_PREFIXES) or _DOI_REF.match(ref):
        doi, arxiv = split_doi(ref)
        return arxiv or doi
    if ref.lower().startswith(("arxiv:", "https://arxiv.org/abs/", "http://arxiv.org/abs/")):
        return arxiv_id(ref)
    if ref.lower().startswith(("http://", "https://")):
        for scheme in ("openalex", "pmid", "pmcid"):
            if found := scheme_ref(scheme, ref):
                return found
        return ref
    m = _PREFIX.fullmatch(ref)
    if m and (prefixed := _PREFIX_SCHEMES.get(m.group(1).lower())):
        return scheme_ref(prefixed, m.group(2)) or ref
    return ref


@dataclass
class PaperIds:
    """The identifiers one source record gives a paper, gathered field by field."""

    doi: str = ""
    arxiv: str = ""
    acl: str = ""
    refs: list[str] = field(default_factory=list)  # scheme refs (openalex:..., corpusid:...)

    def add(self, scheme: str, value: object) -> None:
        """One id; DOI, arXiv and ACL ids fill their fields (the first one given wins)."""
        if scheme == "doi":
            doi, arxiv = split_doi(value)
            self.doi = self.doi or doi
            self.arxiv = self.arxiv or arxiv
        elif scheme == "arxiv":
            self.arxiv = self.arxiv or arxiv_id(value)
        elif scheme == "acl":
            self.acl = self.acl or (value.strip() if isinstance(value, str) else "")
        elif (ref := scheme_ref(scheme, value)) and ref not in self.refs:
            self.refs.append(ref)
