"""Bytes in: opening sources (files, gzip, stdin, children), normalising lines, the multi-literal
search, finding log files. Imports nothing of capscan but the text sanitizer."""
