"""The Textual browser (`capscan tui`). Everything that imports textual lives
under this package; `analyzer.store.browse` and `analyzer.tui.model` are plain
Python (read-only SQL and formatting) so the benchmark and tests can use them
without a terminal."""
