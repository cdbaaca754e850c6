"""The rules' version: a stored diagnosis made under another version is made again.

Its own module so that reading a stored diagnosis (``capscan show``) can check it without
importing the rules."""

# 9: no-offload next steps by cause (0 layers on a GPU found, a CPU-only build, whisper.cpp's -ng)
# 8: host_chip never a GPU name (an Intel Mac's is its processor), plain words for backends without a clamp
# 7: a kernel check that crashed or timed out could not run: neither veto nor proof
# 6: CPU-only on positive evidence only (system_info alone is unknown), words fit the platform
# 5: a probe's output speaks of llama.cpp
RULES_VERSION = "9"  # 4: kernel checks, rule metadata; 3: fixable from observations, with proof; 2: contradictions veto fixable
# The digest of the rules' source when RULES_VERSION was last set: tests/rules/test_rules_version.py fails when
# the rules change and this is not recorded again (with RULES_VERSION bumped when a diagnosis can change).
RULES_DIGEST = "15f15a68dfa4bf0f"
