"""The language server: pure draft reading and ranking glue, plus thin pygls feature handlers."""
