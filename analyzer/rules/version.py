"""The rules' version: a stored diagnosis made under another version is made again.

Its own module so that reading a stored diagnosis (``capscan show``) can check it without
importing the rules."""

RULES_VERSION = "4"  # 4: kernel checks, rule metadata; 3: fixable from observations, with proof; 2: contradictions veto fixable
