"""Diagnosis: the run view, the rule catalog, the engine, same-hardware baselines, compare, and the diagnose-and-store service."""
