"""Checks of a draft's references against the paper store: is an entry real, does it agree with
the stored record, does the cited paper fit its sentence (issue 27). Pure of LSP and of files:
the language server, ``citewise check`` and ``citewise eval check`` all run these."""
