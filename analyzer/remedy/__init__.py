"""`capscan remedy` and `capscan probe`: fix what the diagnosis says is fixable,
prove the fix from the new log, and refuse (with the reason) where forcing
capabilities would be wrong.

Layout: runner (the one command runner), platform (what this machine is and
how injection works on it), check (a check's result), preflight (each check),
macho (the in-process Mach-O reader), dylib (locate/build/verify the
interposer), family (the family cap), plan, launch (run with injection, tee,
store, link, verify), hostdefault, transport (lume/tart/anka/ssh), records
(the actions table), prefix (the `remedy env` per-command prefix). The click commands are in analyzer.cli.remedy and
analyzer.cli.probe; nothing here imports the CLI.
"""
