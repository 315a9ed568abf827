"""JSON Schemas (Draft 2020-12) of every input format bt_exec reads; loaded with importlib.resources."""
