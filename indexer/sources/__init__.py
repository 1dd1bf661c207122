"""Importers for the open scholarly sources, as they are published (issue 25): OpenAlex works,
the Semantic Scholar Academic Graph and Graph API, the arXiv metadata snapshot, Crossref works,
unarXive and S2ORC full text (and Zotero libraries: ``zotero``, ``zotero_db``).

Why a package of small modules: each source has its own field names, id spellings and quirks
(OpenAlex's inverted-index abstracts, S2AG's abstracts in a dataset of their own, Crossref's JATS),
but all of them end as the records and edges the rest of citewise already knows
(:class:`~citewise.indexer.records.PaperRecord`,
:class:`~citewise.indexer.citations.CitationEdge`), so citation expansion, the count prior and the
BibTeX writer use them unchanged. ``ids`` spells every identifier one way, so a paper met in two
sources is one stored paper (``indexer/store_ids.py`` keeps and merges them); ``stream`` reads
plain, ``.gz`` and ``.zst`` files in bounded memory; ``detect`` tells the formats apart by their
content; ``pipeline`` parses a large file in a second process while the store is written;
``loading`` writes what is not a paper (S2AG citation rows, abstracts that come apart).
"""
