"""Lowering passes, one per file. The order they run in is the list in tensorlang/lower/__init__.py."""
