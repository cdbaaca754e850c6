"""``schema``: the JSON Schema of `diagnose --json` and `show --json`, generated from the
contract's pydantic models (``analyzer.output.contract``)."""

from __future__ import annotations

import click


@click.command()
@click.option("--for", "command", type=click.Choice(["diagnose", "show"]), default="diagnose", show_default=True,
              help="whose --json output: diagnose (also pipe mode and probe) or show (one run)")
def schema(command: str) -> None:
    """The JSON Schema of `diagnose --json` (or `show --json`), from the pydantic models."""
    import json

    from analyzer.output.contract import json_schema

    click.echo(json.dumps(json_schema(command), indent=2))
