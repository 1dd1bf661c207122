"""citewise: citation recommendations from your own paper store, ranked by the sentence you write."""

__version__ = "0.1.0"
