"""``formats``: every input format recognised, with its sample lines."""

from __future__ import annotations

import click

from analyzer.cli.options import Options, shared_options
from analyzer.cli.output import echo_json


@click.command()
@shared_options()
def formats(opts: Options) -> None:
    """Every input format recognised, with a sample line each."""
    from analyzer.parsers import FORMATS

    if opts.as_json:
        echo_json([{"name": f.name, "description": f.description, "literals": list(f.literals),
                    "samples": [s.line for s in f.samples]} for f in FORMATS])
        return
    for f in FORMATS:
        click.echo(f"{f.name}: {f.description}")
        click.echo(f"  prefilter: {', '.join(repr(l) for l in f.literals)}")
        for s in f.samples:
            click.echo(f"  {s.kind:<22} {s.line[:150]}")
        click.echo()
