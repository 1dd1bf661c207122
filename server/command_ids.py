"""The ``workspace/executeCommand`` names the server answers (one place: the adapter registers
them, the features put them into code actions and completion items, the clients call them)."""

SUGGEST_COMMAND = "citewise.suggestForDraft"
REINDEX_COMMAND = "citewise.reindex"
INSERT_COMMAND = "citewise.insertCitation"
NOTE_COMMAND = "citewise.entriesApplied"  # a code action's .bib edit was applied (see handlers.code_actions)
STATUS_COMMAND = "citewise.status"  # the server's state, for a status bar
# The one command that goes online: the store grown around the draft's .bib (handlers/fetch.py).
FETCH_COMMAND = "citewise.fetchAround"
COMMANDS = [SUGGEST_COMMAND, REINDEX_COMMAND, INSERT_COMMAND, NOTE_COMMAND, STATUS_COMMAND, FETCH_COMMAND]
