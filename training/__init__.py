"""Training, export and evaluation tooling of citewise's models: not part of the installed package.

Run from a checkout (``python -m training train reranker ...``) with the ``train`` extra; the
recipes are in docs/reranker.md, docs/dense-prefetch.md and docs/hatten.md.
"""
