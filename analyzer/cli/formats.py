"""``formats``: every input format recognised, with its sample lines."""

from __future__ import annotations

import click

from analyzer.cli.options import Options
from analyzer.cli.output import Result, output_options


@click.command()
@output_options("json")
def formats(opts: Options) -> Result:
    """Every input format recognised, with a sample line each."""
    from analyzer.parsers import FORMATS
    from analyzer.parsers.exports import SHAPES

    def human(out) -> None:
        for f in FORMATS:
            out.write(f"{f.name}: {f.description}\n")
            out.write(f"  prefilter: {', '.join(repr(lit) for lit in f.literals)}\n")
            for s in f.samples:
                out.write(f"  {s.kind:<22} {s.line[:150]}\n")
            out.write("\n")
        out.write("capscan's own output, read back as runs with their origin (recognised by its first key):\n")
        for shape in SHAPES:
            out.write(f"{shape.name}: {shape.description}\n  {shape.sample[:150]}\n")

    return Result(human=human, doc=[{"name": f.name, "description": f.description, "literals": list(f.literals),
                                     "samples": [s.line for s in f.samples]} for f in FORMATS]
                  + [{"name": s.name, "description": s.description, "literals": [], "samples": [s.sample]}
                     for s in SHAPES])
