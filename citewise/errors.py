"""The one base of errors a user can act on.

Every error whose message says what went wrong, where, and what to do (a store that is not a
citewise store, a file in no known format, an API that cannot be reached...) derives from
:class:`CitewiseError`, so the CLI prints any of them as one line without a traceback, and a caller
of the library can catch them all at once without catching programming errors.

Leaf module (no imports): every job may use it without adding a dependency or a cycle.
"""

from __future__ import annotations


class CitewiseError(Exception):
    """A problem the user can fix; its message is written for them and shown without a traceback."""
