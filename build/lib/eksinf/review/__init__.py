"""`eksinf diff`: review what a change does to the rendered stack, for a pull request.

snapshot (files -> resources) -> changes (structural differ) -> risks (registered classes) and
cost (NodePool maximum spend) -> report (text, Markdown, JSON). `source` is the only module that
touches git or the disk.
"""
