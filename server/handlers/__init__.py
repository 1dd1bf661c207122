"""LSP feature handlers: one module per feature, thin over the pure core (see server/lsp.py)."""
