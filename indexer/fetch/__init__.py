"""``citewise fetch``: filling a store from the open scholarly APIs (Semantic Scholar's Graph API,
OpenAlex, Crossref), then working offline.

Why a package of its own beside ``sources/``: ``sources/`` reads what the APIs and dumps publish
(files); this package asks for it over the network, politely (``http``), by API (``s2``,
``openalex``, ``crossref``), resolves the names a slice is given (``names``), decides what to
ask for (``plan``) and remembers how far it got inside the store (``state``). Everything fetched lands through the importers of ``sources/`` and the store's id
resolution (``paper_ids``), so a fetched paper is the same stored paper as its copy from a dump,
a ``.bib`` or Zotero.
"""
