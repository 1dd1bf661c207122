"""The paper store: SQLite (FTS5, metadata, citation graph), importers, BibTeX writer, search engines."""
