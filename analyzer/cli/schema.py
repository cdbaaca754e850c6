"""``schema``: the JSON Schema of `diagnose --json`, `show --json` and the self-test bundle, generated from the
contract's pydantic models (``analyzer.output.contract``)."""

from __future__ import annotations

import click


@click.command()
@click.option("--for", "command", type=click.Choice(["diagnose", "show", "bundle"]), default="diagnose",
              show_default=True, help="whose --json output: diagnose (also pipe mode and probe), show (one run), "
                                      "or bundle (the file `remedy selftest --bundle FILE` writes)")
def schema(command: str) -> None:
    """The JSON Schema of `diagnose --json` (or `show --json`, or a self-test bundle), from the pydantic models."""
    import json

    from analyzer.output.contract import json_schema

    click.echo(json.dumps(json_schema(command), indent=2))
