"""The recommender: BM25 and dense prefetch (serving with onnxruntime) and rerankers.

Shipped weights live in this folder beside the code (see ``manifest.json`` of each model).
"""
