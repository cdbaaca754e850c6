"""capscan: diagnose slow LLM inference in VMs from llama.cpp-family logs.

The core (everything here except ``analyzer.tui``) never imports textual.
"""

__version__ = "0.1.0"
