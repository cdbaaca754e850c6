"""The rules' version: a stored diagnosis made under another version is made again.

Its own module so that reading a stored diagnosis (``capscan show``) can check it without
importing the rules."""

# 5: a probe's output speaks of llama.cpp
RULES_VERSION = "5"  # 4: kernel checks, rule metadata; 3: fixable from observations, with proof; 2: contradictions veto fixable
