"""The run builder: events in, RunFacts out. A small assembler (handler table, run lifecycle)
and one handler module per parser family, mirroring analyzer/parsers/."""
