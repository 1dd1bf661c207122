"""The recommender: HAtten prefetch (training in PyTorch, serving with onnxruntime) and rerankers.

Shipped weights live in this folder beside the code (see ``manifest.json`` of each model).
"""
