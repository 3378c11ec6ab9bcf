"""The stack's data model: facts every layer agrees on, defined once, with no I/O beyond reading
configs/. Nothing here imports another eksinf layer except errors, paths and yamlio."""
