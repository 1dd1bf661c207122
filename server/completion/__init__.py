"""A citation key slot's completion, LSP-free: which papers it offers and in what order (``slot``),
each as a plain completion entry (``items``) with its menu line (``labels``). The handler
(``server/handlers/completion.py``) gathers the inputs and ``server/convert.py`` makes LSP types."""
