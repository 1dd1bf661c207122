"""Evaluation protocols shipped with citewise (``citewise eval``): ACM-CR and ACL dev queries,
the placeholder protocol, metrics, and engine parity."""
